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

Written and read through the one strict snapshot codec
(:mod:`progressived.core.snapshot_codec`), as the table's snapshots are: every value has its
field's JSON type and an object with a key this code does not know is refused
(:class:`SnapshotError`, naming the field).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from progressived.core.snapshot_codec import (
    SnapshotError,
    array,
    boolean,
    canonical,
    fields,
    integer,
    mapping,
    string,
    tuple_of,
)
from progressived.core.snapshot_codec import parse as parse_snapshot
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

__all__ = [
    "EVERY",
    "FORMAT",
    "KIND",
    "SnapshotError",
    "balances_of",
    "dumps",
    "from_dict",
    "loads",
    "parse",
    "to_dict",
]

FORMAT = 1
KIND = "link"
EVERY = 50_000  # rows: opening replays at most about this many after the latest snapshot


def _head(head: LedgerHead | None) -> dict[str, Any] | None:
    return None if head is None else {"hash": head.hash, "seq": head.seq}


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
    head = canonical(_head(track.head))
    return f'{{"head":{head},"hwm":{integer(track.hwm, "hwm")},"results":[{results}]}}'


def to_dict(recorded: Mapping[str, Any], state: BookState) -> dict[str, Any]:
    """Everything but the tables' entries (:func:`dumps` writes those as text)."""
    _check_ints(state.balances, "balances")
    _check_ints(state.epochs, "epochs")
    return {
        "format": FORMAT,
        "kind": KIND,
        "parameters": dict(recorded),
        "lseq": integer(state.lseq, "lseq"),
        "balances": {a: state.balances[a] for a in sorted(state.balances)},
        "epochs": {m: state.epochs[m] for m in sorted(state.epochs)},
        "hits": {
            m: {
                "hand": h.hand,
                "seat": h.seat,
                "table": h.table,
                "units": integer(h.units, "hits[].units"),
            }
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
                "units": integer(c.units, "claims[].units"),
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
                "total": integer(g.total, "groups[].total"),
                "opened_ms": g.opened_ms,
                "members": [list(k) for k in g.members],
                "reset_reserve": integer(g.reset_reserve, "groups[].reset_reserve"),
                "reset_seed": integer(g.reset_seed, "groups[].reset_seed"),
                "final": g.final,
            }
            for g in state.groups.values()
        ],
        "contributions": {
            table: [
                [
                    msg_id,
                    c.round,
                    [[p.account, integer(p.units, "postings")] for p in c.postings],
                    c.reversed,
                ]
                for msg_id, c in done.items()
            ]
            for table, done in sorted(state.contributions.items())
        },
    }


def dumps(recorded: Mapping[str, Any], state: BookState) -> str:
    """Canonical JSON text of the book after a row and the parameters recorded by then."""
    body = canonical(to_dict(recorded, state))
    tables = ",".join(f"{json.dumps(t)}:{_table(state.tables[t])}" for t in sorted(state.tables))
    # "tables" sorts after every other key, so it goes just before the closing brace and
    # the whole text stays sorted (tests/test_link_snapshots.py checks it against dumps).
    return f'{body[:-1]},"tables":{{{tables}}}}}'


# -- reading ------------------------------------------------------------------------------

_KEYS = (
    "format", "kind", "parameters", "lseq", "balances", "epochs", "hits", "claims", "groups",
    "contributions", "tables",
)  # fmt: skip
_TRACK = ("head", "hwm", "results")
_HEAD = ("hash", "seq")
_HIT = ("hand", "seat", "table", "units")
_CLAIM = ("table", "claim", "meter", "hand", "seat", "group", "units", "order", "state")
_GROUP = (
    "id", "meter", "hand", "total", "opened_ms", "members", "reset_reserve", "reset_seed", "final",
)  # fmt: skip


def parse(text: str) -> dict[str, Any]:
    """The snapshot's JSON object (:class:`SnapshotError` if it is not a link snapshot)."""
    return parse_snapshot(text, format=FORMAT, kind=KIND)


def _result(data: object) -> Result:
    """A stored result, validated as the message it is (a fault is a ``MessageError``, a
    ``ValueError``: :func:`from_dict` reports it as a snapshot that cannot be read)."""
    result = mapping(data, "tables[].results[].result")
    if result.get("type") != "result":
        raise SnapshotError(f"a stored result of type {result.get('type')!r}")
    return build(Result, {k: v for k, v in result.items() if k != "type"})


def _award_state(value: object) -> AwardState:
    if value not in AWARD_STATES:
        raise SnapshotError(f"claims[].state: not a claim's state: {value!r}")
    return cast(AwardState, value)


def _track(value: object) -> TableTrack:
    data = fields(value, "tables[]", _TRACK)
    results: dict[int, Stored] = {}
    for entry in array(data["results"], "tables[].results"):
        seq, digest, result = tuple_of(entry, "tables[].results[]", 3)
        raw = bytes.fromhex(string(digest, "tables[].results[].digest"))
        if len(raw) != 32:
            raise SnapshotError(f"result {seq}: a digest of {len(raw)} bytes")
        results[integer(seq, "tables[].results[].seq")] = Stored(raw, _result(result))
    head = data["head"]
    if head is not None:
        h = fields(head, "tables[].head", _HEAD)
        head = LedgerHead(
            integer(h["seq"], "tables[].head.seq"), string(h["hash"], "tables[].head.hash")
        )
    return TableTrack(integer(data["hwm"], "tables[].hwm"), head, results)


def _claim(value: object) -> tuple[ClaimKey, ClaimState]:
    c = fields(value, "claims[]", _CLAIM)
    claim = ClaimState(
        table=string(c["table"], "claims[].table"),
        claim=string(c["claim"], "claims[].claim"),
        meter=string(c["meter"], "claims[].meter"),
        hand=string(c["hand"], "claims[].hand"),
        seat=integer(c["seat"], "claims[].seat"),
        group=integer(c["group"], "claims[].group"),
        units=integer(c["units"], "claims[].units"),
        order=integer(c["order"], "claims[].order"),
        state=_award_state(c["state"]),
    )
    return (claim.table, claim.claim), claim


def _member(value: object) -> ClaimKey:
    table, claim = tuple_of(value, "groups[].members[]", 2)
    return string(table, "groups[].members[].table"), string(claim, "groups[].members[].claim")


def _group(value: object) -> Group:
    g = fields(value, "groups[]", _GROUP)
    return Group(
        id=integer(g["id"], "groups[].id"),
        meter=string(g["meter"], "groups[].meter"),
        hand=string(g["hand"], "groups[].hand"),
        total=integer(g["total"], "groups[].total"),
        opened_ms=integer(g["opened_ms"], "groups[].opened_ms"),
        members=tuple(_member(m) for m in array(g["members"], "groups[].members")),
        reset_reserve=integer(g["reset_reserve"], "groups[].reset_reserve"),
        reset_seed=integer(g["reset_seed"], "groups[].reset_seed"),
        final=boolean(g["final"], "groups[].final"),
    )


def _posting(value: object) -> Posting:
    account, units = tuple_of(value, "contributions[].postings[]", 2)
    return Posting(
        string(account, "contributions[].postings[].account"),
        integer(units, "contributions[].postings[].units"),
    )


def _contributed(entry: object) -> tuple[str, Contributed]:
    msg_id, round_no, postings, reversed_ = tuple_of(entry, "contributions[]", 4)
    return string(msg_id, "contributions[].id"), Contributed(
        integer(round_no, "contributions[].round"),
        tuple(_posting(p) for p in array(postings, "contributions[].postings")),
        boolean(reversed_, "contributions[].reversed"),
    )


def _hit(value: object) -> Hit:
    h = fields(value, "hits[]", _HIT)
    return Hit(
        table=string(h["table"], "hits[].table"),
        seat=integer(h["seat"], "hits[].seat"),
        hand=string(h["hand"], "hits[].hand"),
        units=integer(h["units"], "hits[].units"),
    )


def _units(value: object, where: str) -> dict[str, int]:
    return {k: integer(v, f"{where}[{k!r}]") for k, v in mapping(value, where).items()}


def from_dict(data: Mapping[str, Any]) -> tuple[dict[str, Any], BookState]:
    """The recorded parameters and the book :func:`dumps` wrote (:class:`SnapshotError`,
    naming the field, if a value is not of its field's type or a key is unknown)."""
    d = fields(data, "snapshot", _KEYS)
    try:
        groups = {g.id: g for g in (_group(g) for g in array(d["groups"], "groups"))}
        state = BookState(
            lseq=integer(d["lseq"], "lseq"),
            balances=_units(d["balances"], "balances"),
            tables={t: _track(v) for t, v in mapping(d["tables"], "tables").items()},
            claims=dict(_claim(c) for c in array(d["claims"], "claims")),
            groups=groups,
            contributions={
                t: dict(_contributed(e) for e in array(done, "contributions[]"))
                for t, done in mapping(d["contributions"], "contributions").items()
            },
            epochs=_units(d["epochs"], "epochs"),
            hits={m: _hit(h) for m, h in mapping(d["hits"], "hits").items()},
        )
    except SnapshotError:
        raise
    except ValueError as exc:  # a stored result that is not a valid message, a bad digest
        raise SnapshotError(f"cannot be read: {exc}") from None
    return mapping(d["parameters"], "parameters"), state


def loads(text: str) -> tuple[dict[str, Any], BookState]:
    """:func:`from_dict` of the text (:class:`SnapshotError` if it cannot be read)."""
    return from_dict(parse(text))


def balances_of(text: str) -> dict[str, int]:
    """Only the balances (``ledger verify``'s check of the latest snapshot against the
    postings up to its row)."""
    return _units(fields(parse(text), "snapshot", _KEYS)["balances"], "balances")
