"""The link ledger's rows (pure): their JSON, the parameters they record, and the replay.

The link controller's ledger is a table ledger's file format (docs/ledger.md) with other
rows (docs/link.md, "The link ledger"). This module says what those rows hold and rebuilds
the book from them; :mod:`progressived.link.store.ledger` does the I/O. The same replay serves
opening the ledger (a mismatch refuses to open) and ``progressivectl ledger verify`` (a
mismatch is a problem naming the row), so both check the same thing:

* ``link_created`` (system) and ``parameter_changed`` (parameter) carry the link's whole
  parameters (:func:`params_to_dict`), so the book can be rebuilt without the configuration;
* ``meter_opened`` (engine) funds a linked meter with its seed;
* ``link_applied`` (engine) is one book :class:`~progressived.link.core.state.Applied` event: the
  table message as received, the link's receive time and the result it got, with the
  postings. Replaying the message through :func:`progressived.link.core.book.receive` with that
  time and the head stored in the result must give back the same result and postings;
* ``link_refused`` (system) is a message refused without consuming a sequence (no effect).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

from progressived.core.params import AboveLimit, Policy
from progressived.engine import accounts
from progressived.engine.events import Posting
from progressived.link.core import book
from progressived.link.core import params as lp
from progressived.link.core.messages import LedgerHead, encode, to_dict
from progressived.link.core.state import Applied, BookState, LinkRefused

LEDGER_KIND = "link"
AT_OPEN_REASON = "the link was opened with parameters that differ from the last recorded ones"


# -- parameters ---------------------------------------------------------------------------


def params_to_dict(params: lp.LinkParams) -> dict[str, Any]:
    """Every link parameter, JSON-ready (amounts in units, fractions as exact text)."""
    return {
        "link": params.link_id,
        "meters": [
            {
                "id": m.id,
                "seed_units": m.seed,
                "rate": str(m.rate),
                "reserve_rate": str(m.reserve_rate),
                "limit_units": m.limit,
                "above_limit": m.above_limit.value,
                "wager_base_units": m.wager_base,
                "hands": {hand: str(share) for hand, share in sorted(m.hands.items())},
            }
            for m in params.meters
        ],
        "tables": sorted(params.tables),
        "policy": params.policy.value,
        "split_window_ms": params.split_window_ms,
        "keep_results": params.keep_results,
    }


def params_from_dict(data: Mapping[str, Any]) -> lp.LinkParams:
    """The parameters :func:`params_to_dict` wrote (``KeyError``/``ValueError`` if garbled)."""
    meters = tuple(
        lp.MeterSpec(
            id=str(m["id"]),
            seed=int(m["seed_units"]),
            rate=Fraction(m["rate"]),
            reserve_rate=Fraction(m["reserve_rate"]),
            limit=None if m["limit_units"] is None else int(m["limit_units"]),
            above_limit=AboveLimit(m["above_limit"]),
            wager_base=int(m["wager_base_units"]),
            hands={str(h): Fraction(s) for h, s in m["hands"].items()},
        )
        for m in data["meters"]
    )
    return lp.LinkParams(
        link_id=str(data["link"]),
        meters=meters,
        tables=frozenset(str(t) for t in data["tables"]),
        policy=Policy(data["policy"]),
        split_window_ms=int(data["split_window_ms"]),
        keep_results=int(data["keep_results"]),
    )


def flat(params: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`params_to_dict`'s content as ``key: value`` (what ``changes`` lists)."""
    out: dict[str, Any] = {k: v for k, v in params.items() if k not in ("meters", "link")}
    for meter in params["meters"]:
        for key, value in meter.items():
            if key != "id":
                out[f"meters.{meter['id']}.{key}"] = value
    return out


def changed_detail(recorded: Mapping[str, Any], params: lp.LinkParams) -> dict[str, Any] | None:
    """The ``parameter_changed`` row's data when ``params`` differ from ``recorded``."""
    after = params_to_dict(params)
    if after == dict(recorded):
        return None
    old, new = flat(recorded), flat(after)
    changes = {
        k: {"old": old.get(k), "new": new.get(k)}
        for k in sorted(set(old) | set(new))
        if old.get(k) != new.get(k)
    }
    return {
        "link": params.link_id,
        "changes": changes,
        "parameters": after,
        "reason": AT_OPEN_REASON,
    }


# -- rows ---------------------------------------------------------------------------------


def postings_json(postings: Iterable[Posting]) -> list[list[Any]]:
    return [[p.account, p.units] for p in postings]


def meter_opened(spec: lp.MeterSpec) -> tuple[dict[str, Any], tuple[Posting, ...]]:
    """A linked meter funded with its seed: the row's data and postings."""
    postings = (
        Posting(accounts.seed_funding(spec.id), -spec.seed),
        Posting(accounts.meter(spec.id), spec.seed),
    )
    data = {
        "kind": "meter_opened",
        "seat": 0,
        "meter": spec.id,
        "units": spec.seed,
        "postings": postings_json(postings),
    }
    return data, postings


def applied(event: Applied, at_ms: int) -> dict[str, Any]:
    """A ``link_applied`` row's data (``kind`` and ``seat`` as every engine row has them)."""
    return {
        "kind": event.kind,
        "seat": 0,
        "lseq": event.lseq,
        "table": event.table,
        "seq": event.seq,
        "id": event.id,
        "head": {"seq": event.head.seq, "hash": event.head.hash},
        "at_ms": at_ms,
        "message": json.loads(event.message),
        "result": to_dict(event.result),
        "postings": postings_json(event.postings),
    }


def applied_text(event: Applied, at_ms: int) -> str:
    """``dumps(applied(event, at_ms))`` (progressived/ledger/rows.py), built from the
    message's canonical bytes and the result's instead of parsing and re-encoding them: the
    group commit's hot path. Keys in sorted order, no spaces, ASCII (every id and hash
    matches the protocol's patterns, and the message bytes are the book's canonical JSON);
    tests/test_link_ledger.py checks it against ``dumps`` for every row kind."""
    head = event.head
    postings = _ENCODE(postings_json(event.postings))
    return (
        f'{{"at_ms":{at_ms},"head":{{"hash":"{head.hash}","seq":{head.seq}}},'
        f'"id":"{event.id}","kind":"{event.kind}","lseq":{event.lseq},'
        f'"message":{event.message.decode("ascii")},"postings":{postings},'
        f'"result":{encode(event.result).decode("ascii")},"seat":0,"seq":{event.seq},'
        f'"table":"{event.table}"}}'
    )


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def refused(event: LinkRefused) -> dict[str, Any]:
    return {"table": event.table, "seq": event.seq, "code": event.code, "reason": event.reason}


def canonical(message: Mapping[str, Any]) -> bytes:
    """The message's bytes as the book encodes it (sorted keys, no spaces)."""
    return json.dumps(message, sort_keys=True, separators=(",", ":")).encode()


def with_meters(state: BookState, postings: Sequence[Posting], meter_id: str) -> BookState:
    """The book after a ``meter_opened`` row."""
    balances = dict(state.balances)
    for p in postings:
        balances[p.account] = balances.get(p.account, 0) + p.units
    epochs = dict(state.epochs)
    epochs.setdefault(meter_id, 0)
    return replace(state, balances=balances, epochs=epochs)


# -- replay -------------------------------------------------------------------------------


class Replay:
    """Rebuilds the book row by row; each :meth:`row` returns what is wrong with it."""

    def __init__(self) -> None:
        self.params: lp.LinkParams | None = None
        self.recorded: dict[str, Any] | None = None  # the parameters as last recorded
        self.state = BookState()

    def row(self, kind: str, data: Mapping[str, Any]) -> str | None:
        try:
            return self._row(kind, data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return f"the {kind} row cannot be replayed: {exc!r}"

    def _row(self, kind: str, data: Mapping[str, Any]) -> str | None:
        if kind in ("link_created", "parameter_changed"):
            recorded = data if kind == "link_created" else data["parameters"]
            self.params = params_from_dict(recorded)
            self.recorded = params_to_dict(self.params)
            return None
        if kind == "meter_opened":
            postings = [Posting(str(a), int(u)) for a, u in data["postings"]]
            self.state = with_meters(self.state, postings, str(data["meter"]))
            return None
        if kind != "link_applied":
            return None
        if self.params is None:
            return "a link_applied row before the link_created row"
        result = data["result"]
        step = book.receive(
            self.params,
            self.state,
            canonical(data["message"]),
            topic_table=str(data["table"]),
            at_ms=int(data["at_ms"]),
            head=LedgerHead(int(result["head"]["seq"]), str(result["head"]["hash"])),
        )
        events = [e for e in step.events if isinstance(e, Applied)]
        if len(events) != 1:
            why = step.replies[0].reason if step.replies else "no effect"  # type: ignore[union-attr]
            return f"the message does not apply when replayed ({why})"
        event = events[0]
        if to_dict(event.result) != result:
            return "the stored result differs from the replayed one"
        if postings_json(event.postings) != data["postings"]:
            return "the stored postings differ from the replayed ones"
        if (event.lseq, event.table, event.seq, event.id) != (
            data["lseq"],
            data["table"],
            data["seq"],
            data["id"],
        ) or {"seq": event.head.seq, "hash": event.head.hash} != data["head"]:
            return "lseq, table, seq, id or head differ from the message's"
        self.state = step.state
        return None
