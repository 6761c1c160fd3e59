"""The pure half of a ledger write: from the calls of one transaction to the rows it inserts.

:func:`plan` takes the committed head (last row, its hash, balances, engine state) and the
calls of one transaction (:class:`Batch` and :class:`Record`), and computes everything the
transaction writes: journal rows with their hash chain, postings, balance rows, idempotency
keys, outbox messages, a recovery snapshot when one is due, and the head after it. It does
no I/O, so the checks that refuse a call (unbalanced postings, a field that would make the
hash ambiguous, the engine's balances differing from the postings) run before SQLite is
touched, and the writer (:mod:`progressived.ledger.store`, or the link's) hands the plan to a
storage adapter (:mod:`progressived.storage.port`), which only inserts it.

Micro-benchmark: ``python -m bench.ledger_plan`` (the plan per row against SHA-256 of the
chained text; docs/performance.md, "Micro-benchmarks").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from hashlib import sha256
from typing import Any

from progressived.engine.events import Event, Posting
from progressived.engine.meter_requests import request_to_dict
from progressived.engine.state import TableState
from progressived.ledger import chain, snapshot
from progressived.ledger.event_text import event_text
from progressived.ledger.rows import AppendResult, Batch, JournalRow, Record, dumps, nonzero
from progressived.storage.port import JournalValues

ROUND_END = frozenset({"round_reconciled", "round_voided"})
SNAPSHOT_EVERY = 1000  # rows: recovery replays at most about this many
SNAPSHOT_AT_ROUND_END = 200  # rows: a snapshot at a round end once this many have passed


@dataclass(frozen=True, slots=True)
class CommittedHead:
    """The committed end of the ledger that a plan starts from (and ends at)."""

    seq: int = 0
    hash: str = chain.GENESIS
    balances: Mapping[str, int] = field(default_factory=dict)
    state: TableState = field(default_factory=TableState)
    since_snapshot: int = 0


@dataclass(frozen=True, slots=True)
class Plan:
    """The rows of one transaction, ready to insert, and the head once it committed."""

    results: list[AppendResult]
    journal: list[JournalValues]
    postings: list[tuple[int, int, str, int]]
    balances: list[tuple[str, int, int]]  # account, units, seq of the last posting to it
    keys: list[tuple[str, int, int]]  # idempotency key, first_seq, last_seq
    outbox: list[tuple[int, str, str, int, int]]  # seq, topic, payload, qos, retain
    snapshot: tuple[int, str, str] | None  # seq, hash, state JSON
    head: CommittedHead

    @property
    def empty(self) -> bool:
        """Nothing to write (every call was a duplicate, or wrote no rows and no key)."""
        return not self.journal and not self.keys


class AppendRefused(ValueError):
    """A call the ledger will not journal (the message says why)."""


_Spec = tuple[
    str, int | None, int, str, str, dict[str, Any], tuple[Posting, ...], str | None
]  # at, round, seat, kind, category, data, postings, its JSON text when known


def plan(
    items: Sequence[Batch | Record],
    head: CommittedHead,
    known: Mapping[str, AppendResult],
    *,
    table_id: str,
    snapshot_every: int = SNAPSHOT_EVERY,
) -> Plan:
    """The rows ``items`` write after ``head``; ``known`` holds the idempotency keys of
    ``items`` already journaled (their calls are duplicates and write nothing).

    Raises :class:`AppendRefused` when a call must be refused; nothing is then written by any
    call of the transaction.
    """
    w = _Writing(
        table_id=table_id,
        seq=head.seq,
        prev=head.hash,
        balances=dict(head.balances),
        state=head.state,
        since=head.since_snapshot,
        first_keys=dict(known),
    )
    for item in items:
        key = item.idempotency_key
        if key is not None:
            first = w.first_keys.get(key)
            if first is not None:
                w.results.append(replace(first, duplicate=True))
                continue
        try:
            rows, count = _journal(w, item, key)
        except (ValueError, TypeError) as exc:
            raise AppendRefused(str(exc)) from None
        _conclude(w, item, key, rows, count)
    return _finish(w, snapshot_every)


@dataclass(slots=True, kw_only=True)
class _Writing:
    """What :func:`plan` has written so far in one transaction (its running state)."""

    table_id: str
    seq: int
    prev: str  # the hash of the last row
    balances: dict[str, int]
    state: TableState
    since: int  # rows since the last snapshot
    first_keys: dict[str, AppendResult]  # idempotency key -> the call that first wrote it
    round_end: bool = False
    results: list[AppendResult] = field(default_factory=list)
    journal: list[JournalValues] = field(default_factory=list)
    legs: list[tuple[int, int, str, int]] = field(default_factory=list)
    touched: dict[str, int] = field(default_factory=dict)  # account -> seq of its last posting
    keys: list[tuple[str, int, int]] = field(default_factory=list)
    outbox: list[tuple[int, str, str, int, int]] = field(default_factory=list)


def _journal(w: _Writing, item: Batch | Record, key: str | None) -> tuple[list[JournalRow], int]:
    """Number, hash and post the rows of one call; its rows as the outbox callback reads
    them (only when it has one) and how many it wrote. Raises ``ValueError`` or
    ``TypeError`` for a call to refuse."""
    seq, prev, table_id = w.seq, w.prev, w.table_id
    balances, journal, legs, touched = w.balances, w.journal, w.legs, w.touched
    rows: list[JournalRow] = []
    count = 0
    actor = chain.clean("actor", item.actor)
    at = chain.clean("at", item.at)
    if key is not None:
        chain.clean("idempotency key", key)
        if not key:
            raise ValueError("an idempotency key may not be empty")
    specs = _specs(item, at)
    for row_at, rnd, seat, kind, category, data, postings, known_text in specs:
        if kind in ROUND_END and category == "engine":
            w.round_end = True
        seq += 1
        text = dumps(data) if known_text is None else known_text
        idem = key if not count else None
        row_hash = sha256(
            f"{prev}|{seq}|{row_at}|{table_id}|{'' if rnd is None else rnd}|{seat}|{kind}|"
            f"{category}|{actor}|{'' if idem is None else idem}|{text}".encode()
        ).hexdigest()  # chain.link(prev, chain.content(...)), inlined on the hot path
        journal.append(
            (
                seq,
                row_at,
                table_id,
                rnd,
                seat,
                kind,
                category,
                actor,
                idem,
                text,
                row_hash,
                prev,
            )
        )
        prev = row_hash
        for leg, posting in enumerate(postings):
            account, units = posting.account, posting.units
            if type(units) is not int:
                raise ValueError(f"{kind}: amounts must be integers")
            legs.append((seq, leg, account, units))
            balances[account] = balances.get(account, 0) + units
            touched[account] = seq
        count += 1
        if item.outbox is not None:  # only the outbox callback needs them
            rows.append(JournalRow(seq, row_at, kind, rnd, seat, data, category, actor, idem, prev))
    w.seq, w.prev = seq, prev
    return rows, count


def _conclude(
    w: _Writing, item: Batch | Record, key: str | None, rows: list[JournalRow], count: int
) -> None:
    """After one call's rows: the engine's balances checked against the postings, its
    result, its idempotency key and its outbox messages."""
    if isinstance(item, Batch):
        engine = item.state.balances  # equal dicts first: the usual case, in C
        if w.balances != engine and nonzero(w.balances) != nonzero(engine):
            raise AppendRefused("the engine's balances differ from the ledger's after these events")
        w.state = item.state
    result = AppendResult(w.seq - count + 1, w.seq)
    w.results.append(result)
    w.since += count
    if key is not None:
        w.first_keys[key] = result
        w.keys.append((key, result.first_seq, result.last_seq))
    if item.outbox is not None and rows:
        for msg in item.outbox(rows):
            w.outbox.append((rows[-1].seq, msg.topic, msg.payload, msg.qos, int(msg.retain)))


def _finish(w: _Writing, snapshot_every: int) -> Plan:
    """The plan of the whole transaction: a snapshot when one is due, and the head after."""
    since = w.since
    snap = None
    if w.journal and (since >= snapshot_every or (w.round_end and since >= SNAPSHOT_AT_ROUND_END)):
        snap = (w.seq, w.prev, snapshot.dumps(w.state))
    after = CommittedHead(w.seq, w.prev, w.balances, w.state, 0 if snap is not None else since)
    return Plan(
        w.results,
        w.journal,
        w.legs,
        [(account, w.balances[account], at_seq) for account, at_seq in w.touched.items()],
        w.keys,
        w.outbox,
        snap,
        after,
    )


def _specs(item: Batch | Record, at: str) -> list[_Spec]:
    """The rows of one call, before numbering and hashing."""
    if isinstance(item, Record):
        chain.clean("kind", item.kind)
        if sum(p.units for p in item.postings):
            raise ValueError(f"{item.kind} postings do not balance")
        detail = dict(item.detail)
        return [
            (at, item.round, item.seat, item.kind, item.category, detail, item.postings, item.text)
        ]
    specs: list[_Spec] = []
    for event in item.events:
        text = event_text(event)
        # The dict is needed for the encoder's text or the outbox callback's rows only.
        data = event_dict(event) if text is None or item.outbox is not None else _UNUSED
        specs.append(
            (
                chain.clean("at", event.at) or at,
                event.round,
                event.seat,
                event.kind,
                "engine",
                data,
                event.postings,
                text,
            )
        )
        if sum([p.units for p in event.postings]):
            raise ValueError(f"{event.kind} postings do not balance")
    return specs


_UNUSED: dict[str, Any] = {}  # a spec's data when its text is known and no callback reads it
_FIELDS: dict[type[Event], tuple[str, ...]] = {}


def event_dict(event: Event) -> dict[str, Any]:
    """``event_to_dict(event)``, with the dataclass field list cached per event type.

    The hot path calls this once per row; ``dataclasses.fields`` is the slow part of the
    engine's function. The output is the same (tests/test_ledger_perf.py checks it).
    """
    names = _FIELDS.get(type(event))
    if names is None:
        names = _FIELDS[type(event)] = tuple(f.name for f in dataclasses.fields(event))
    out: dict[str, Any] = {"kind": event.kind}
    for name in names:
        value = getattr(event, name)
        if name == "postings":
            out[name] = [[p.account, p.units] for p in value]
        elif isinstance(value, tuple):
            if name == "settlement":
                out[name] = [dataclasses.asdict(p) for p in value]
            else:
                out[name] = list(value)
        elif name == "request":  # a deferred meter request (meter_requested)
            out[name] = request_to_dict(value)
        else:
            out[name] = value
    return out
