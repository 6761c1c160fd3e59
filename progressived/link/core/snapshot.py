"""The link book to JSON and back: the link ledger's snapshots (docs/link.md, "Snapshots").

A snapshot is the link's :class:`~progressived.link.core.state.BookState` after a journal row,
with the link parameters recorded at that row (so opening the ledger needs no scan for the
last ``link_created`` / ``parameter_changed`` row). Opening loads the latest one and
replays only the rows after it; ``ledger verify`` compares every one with the book replayed
up to its row. The text is canonical JSON (sorted keys, no spaces, ASCII), every number an
integer (the book holds no fractions; a float or a fraction is refused both ways), and it
round-trips exactly: ``loads(dumps(p, s)) == (p, s)``, with the order of the maps whose
order matters kept (a table's reversible contributions, oldest first; its stored results,
by sequence; claims and groups in the order the book made them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from progressived.engine.events import Posting
from progressived.link.core.messages import AWARD_STATES, Hit, LedgerHead, Result, build, encode
from progressived.link.core.models import AwardState
from progressived.link.core.state import (
    BookState,
    ClaimKey,
    ClaimState,
    Contributed,
    Group,
    Stored,
    TableTrack,
)

FORMAT = 1
KIND = "link"
EVERY = 50_000  # rows: opening replays at most about this many after the latest snapshot


class SnapshotError(ValueError):
    """A snapshot that is not a link snapshot this code can read (the message says why)."""


def _head(head: LedgerHead | None) -> dict[str, Any] | None:
    return None if head is None else {"hash": head.hash, "seq": head.seq}


def _int(value: object) -> int:
    if type(value) is not int:
        raise SnapshotError(f"expected an integer, got {value!r}")
    return value


def _str(value: object) -> str:
    if type(value) is not str:
        raise SnapshotError(f"expected a string, got {value!r}")
    return value


def _bool(value: object) -> bool:
    if type(value) is not bool:
        raise SnapshotError(f"expected true or false, got {value!r}")
    return value


def _check_ints(values: Mapping[str, int], what: str) -> None:
    for key, value in values.items():
        if type(value) is not int:  # a Fraction or a float in the book is a bug: refuse it
            raise SnapshotError(f"{what}[{key!r}] is {value!r}, not an integer")


# -- writing ------------------------------------------------------------------------------


def _table(track: TableTrack) -> str:
    """One table's entry as canonical JSON text (the stored results by the fast encoder:
    they are most of a snapshot's bytes)."""
    results = ",".join(
        f'[{seq},"{stored.digest.hex()}",{encode(stored.result).decode("ascii")}]'
        for seq, stored in track.results.items()
    )
    head = json.dumps(_head(track.head), sort_keys=True, separators=(",", ":"))
    return f'{{"head":{head},"hwm":{_int(track.hwm)},"results":[{results}]}}'


def to_dict(recorded: Mapping[str, Any], state: BookState) -> dict[str, Any]:
    """Everything but the tables' entries (:func:`dumps` writes those as text)."""
    _check_ints(state.balances, "balances")
    _check_ints(state.epochs, "epochs")
    return {
        "format": FORMAT,
        "kind": KIND,
        "parameters": dict(recorded),
        "lseq": _int(state.lseq),
        "balances": {a: state.balances[a] for a in sorted(state.balances)},
        "epochs": {m: state.epochs[m] for m in sorted(state.epochs)},
        "hits": {
            m: {"hand": h.hand, "seat": h.seat, "table": h.table, "units": _int(h.units)}
            for m, h in sorted(state.hits.items())
        },
        "claims": [
            {
                "table": c.table,
                "claim": c.claim,
                "meter": c.meter,
                "hand": c.hand,
                "seat": c.seat,
                "group": c.group,
                "units": _int(c.units),
                "order": c.order,
                "state": c.state,
            }
            for c in state.claims.values()
        ],
        "groups": [
            {
                "id": g.id,
                "meter": g.meter,
                "hand": g.hand,
                "total": _int(g.total),
                "opened_ms": g.opened_ms,
                "members": [list(k) for k in g.members],
                "reset_reserve": _int(g.reset_reserve),
                "reset_seed": _int(g.reset_seed),
                "final": g.final,
            }
            for g in state.groups.values()
        ],
        "contributions": {
            table: [
                [msg_id, c.round, [[p.account, _int(p.units)] for p in c.postings], c.reversed]
                for msg_id, c in done.items()
            ]
            for table, done in sorted(state.contributions.items())
        },
    }


_DUMPS = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


def dumps(recorded: Mapping[str, Any], state: BookState) -> str:
    """Canonical JSON text of the book after a row and the parameters recorded by then."""
    body = _DUMPS(to_dict(recorded, state))
    tables = ",".join(f"{json.dumps(t)}:{_table(state.tables[t])}" for t in sorted(state.tables))
    # "tables" sorts after every other key, so it goes just before the closing brace and
    # the whole text stays sorted (tests/test_link_snapshots.py checks it against dumps).
    return f'{body[:-1]},"tables":{{{tables}}}}}'


# -- reading ------------------------------------------------------------------------------


def _no_float(text: str) -> object:
    raise SnapshotError(f"{text} is not an integer: a snapshot holds integers only")


def _no_constant(text: str) -> object:
    raise SnapshotError(f"{text} is not a JSON number")


def parse(text: str) -> dict[str, Any]:
    """The snapshot's JSON object (:class:`SnapshotError` if it is not a link snapshot)."""
    try:
        data = json.loads(text, parse_float=_no_float, parse_constant=_no_constant)
    except SnapshotError:
        raise
    except ValueError as exc:
        raise SnapshotError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SnapshotError("a snapshot is a JSON object")
    if data.get("kind") != KIND or data.get("format") != FORMAT:
        raise SnapshotError(
            f"not a link snapshot of format {FORMAT} "
            f"(kind {data.get('kind')!r}, format {data.get('format')!r})"
        )
    return data


def _result(data: Mapping[str, Any]) -> Result:
    """A stored result, validated as the message it is (a fault is a ``MessageError``, a
    ``ValueError``: :func:`from_dict` reports it as a snapshot that cannot be read)."""
    if data.get("type") != "result":
        raise SnapshotError(f"a stored result of type {data.get('type')!r}")
    return build(Result, {k: v for k, v in data.items() if k != "type"})


def _award_state(value: object) -> AwardState:
    if value not in AWARD_STATES:
        raise SnapshotError(f"a claim's state {value!r}")
    return cast(AwardState, value)


def _track(data: Mapping[str, Any]) -> TableTrack:
    head = data["head"]
    results: dict[int, Stored] = {}
    for seq, digest, result in data["results"]:
        raw = bytes.fromhex(_str(digest))
        if len(raw) != 32:
            raise SnapshotError(f"result {seq}: a digest of {len(raw)} bytes")
        results[_int(seq)] = Stored(raw, _result(result))
    return TableTrack(
        _int(data["hwm"]),
        None if head is None else LedgerHead(_int(head["seq"]), _str(head["hash"])),
        results,
    )


def _claim(c: Mapping[str, Any]) -> tuple[ClaimKey, ClaimState]:
    claim = ClaimState(
        table=_str(c["table"]),
        claim=_str(c["claim"]),
        meter=_str(c["meter"]),
        hand=_str(c["hand"]),
        seat=_int(c["seat"]),
        group=_int(c["group"]),
        units=_int(c["units"]),
        order=_int(c["order"]),
        state=_award_state(c["state"]),
    )
    return (claim.table, claim.claim), claim


def _group(g: Mapping[str, Any]) -> Group:
    return Group(
        id=_int(g["id"]),
        meter=_str(g["meter"]),
        hand=_str(g["hand"]),
        total=_int(g["total"]),
        opened_ms=_int(g["opened_ms"]),
        members=tuple((_str(t), _str(c)) for t, c in g["members"]),
        reset_reserve=_int(g["reset_reserve"]),
        reset_seed=_int(g["reset_seed"]),
        final=_bool(g["final"]),
    )


def _contributed(entry: list[Any]) -> tuple[str, Contributed]:
    msg_id, round_no, postings, reversed_ = entry
    return _str(msg_id), Contributed(
        _int(round_no),
        tuple(Posting(_str(a), _int(u)) for a, u in postings),
        _bool(reversed_),
    )


def from_dict(data: Mapping[str, Any]) -> tuple[dict[str, Any], BookState]:
    """The recorded parameters and the book :func:`dumps` wrote."""
    try:
        claims = dict(_claim(c) for c in data["claims"])
        groups = {g.id: g for g in (_group(g) for g in data["groups"])}
        state = BookState(
            lseq=_int(data["lseq"]),
            balances={_str(a): _int(u) for a, u in data["balances"].items()},
            tables={_str(t): _track(v) for t, v in data["tables"].items()},
            claims=claims,
            groups=groups,
            contributions={
                _str(t): dict(_contributed(e) for e in done)
                for t, done in data["contributions"].items()
            },
            epochs={_str(m): _int(e) for m, e in data["epochs"].items()},
            hits={
                _str(m): Hit(
                    table=_str(h["table"]),
                    seat=_int(h["seat"]),
                    hand=_str(h["hand"]),
                    units=_int(h["units"]),
                )
                for m, h in data["hits"].items()
            },
        )
        recorded = data["parameters"]
        if not isinstance(recorded, dict):
            raise SnapshotError("parameters: expected an object")
    except SnapshotError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SnapshotError(f"cannot be read: {exc!r}") from None
    return recorded, state


def loads(text: str) -> tuple[dict[str, Any], BookState]:
    """:func:`from_dict` of the text (:class:`SnapshotError` if it cannot be read)."""
    return from_dict(parse(text))


def balances_of(text: str) -> dict[str, int]:
    """Only the balances (``ledger verify``'s check of the latest snapshot against the
    postings up to its row)."""
    try:
        balances = parse(text)["balances"]
        return {_str(a): _int(u) for a, u in balances.items()}
    except (KeyError, TypeError, AttributeError) as exc:
        raise SnapshotError(f"cannot be read: {exc!r}") from None
