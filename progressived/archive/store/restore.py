"""A table's ledger file made again from the archive (``progressivectl ledger restore``).

The journal rows are the archived ones, byte for byte (so the chain and the head hash are
the archive's), each run of rows checked with the archive's own chain check as it is read;
everything else in a ledger file is derived from them exactly as the ledger derives it
(docs/ledger.md): the postings from each engine row's ``postings``, the balances as their
sums, the idempotency keys from the rows that carry one, the engine state replayed from the
engine rows and written as one snapshot at the head (so the daemon's recovery starts
there), and, for a linked table, the link outbox from the ``link_sent`` rows that have no
``link_result`` (sent again by the daemon; the link answers a repeat from its stored
result). Written in transactions of :data:`CHUNK` rows into a new file only; the file is
removed again if the restore fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from progressived.archive.core import chain
from progressived.archive.core.chain import Head, Outcome
from progressived.archive.core.wire import GENESIS, MAX_ROWS, Row
from progressived.engine.core import evolve
from progressived.engine.events import event_from_dict
from progressived.engine.state import TableState
from progressived.ledger import opening, snapshot
from progressived.ledger.errors import LedgerError, LedgerMissing
from progressived.link.core import messages as lm
from progressived.storage.port import JournalValues, Statement

CHUNK = 5_000
LINK_OUTBOX = "INSERT INTO link_outbox (seq, id, type, topic, payload) VALUES (?, ?, ?, ?, ?)"


@dataclass(frozen=True, slots=True)
class _Head:
    seq: int
    hash: str


@dataclass
class _Rows:
    """One transaction's rows (the storage port's ``Writable``)."""

    journal: list[JournalValues] = field(default_factory=list)
    postings: list[tuple[int, int, str, int]] = field(default_factory=list)
    balances: list[tuple[str, int, int]] = field(default_factory=list)
    keys: list[tuple[str, int, int]] = field(default_factory=list)
    outbox: list[tuple[int, str, str, int, int]] = field(default_factory=list)
    snapshot: tuple[int, str, str] | None = None
    head: _Head = _Head(0, GENESIS)


@dataclass
class Restored:
    """What a restore wrote: the rows, the head (the archive's), the messages it put back in
    the link outbox."""

    table: str
    out: Path
    rows: int = 0
    head: Head = field(default_factory=Head)
    link_outbox: int = 0
    link_seq: int = 0  # the last link message the restored ledger journaled sending


class _Derived:
    """What the ledger derives from its rows, accumulated as they stream by."""

    def __init__(self, table: str, prefix: str) -> None:
        self.table, self.prefix = table, prefix
        self.state = TableState()
        self.balances: dict[str, tuple[int, int]] = {}
        self.sent: dict[int, tuple[str, dict[str, Any]]] = {}  # link seq -> (link, data)
        self.link_seq = 0

    def add(self, row: Row, out: _Rows) -> None:
        out.journal.append(
            (row.seq, row.at, self.table, row.round, row.seat, row.kind, row.category,
             row.actor, row.idem_key, row.data, row.hash, row.prev_hash)
        )
        if row.idem_key is not None and row.idem_last is not None:
            out.keys.append((row.idem_key, row.seq, row.idem_last))
        if row.category == "engine":
            data = json.loads(row.data)
            for leg, (account, units) in enumerate(data.get("postings", [])):
                out.postings.append((row.seq, leg, str(account), int(units)))
                total = self.balances.get(account, (0, 0))[0] + int(units)
                self.balances[str(account)] = (total, row.seq)
            self.state = evolve(self.state, event_from_dict(data))
        elif row.kind == "link_sent":
            data = json.loads(row.data)
            self.sent[int(data["seq"])] = (str(data["link"]), data)
            self.link_seq = max(self.link_seq, int(data["seq"]))
        elif row.kind == "link_result":
            self.sent.pop(int(json.loads(row.data)["seq"]), None)

    def link_outbox(self) -> list[Statement]:
        """The unanswered messages, as the table's outbox held them (docs/link.md)."""
        out: list[Statement] = []
        for seq, (link, data) in sorted(self.sent.items()):
            message = data["message"]
            payload = json.dumps(message, sort_keys=True, separators=(",", ":"))
            topic = lm.from_table_topic(self.prefix, link, self.table)
            out.append((LINK_OUTBOX, (seq, str(data["id"]), str(data["type"]), topic, payload)))
        return out


def _checked(table: str, rows: Iterable[Row]) -> Iterator[list[Row]]:
    """The rows in runs, each judged with the archive's chain check from the genesis."""
    head, run = Head(), []
    for row in rows:
        run.append(row)
        if len(run) == MAX_ROWS:
            head = _judge(table, head, run)
            yield run
            run = []
    if run:
        _judge(table, head, run)
        yield run


def _judge(table: str, head: Head, run: Sequence[Row]) -> Head:
    verdict = chain.judge(head, table, run, {})
    if verdict.outcome is not Outcome.STORE:
        why = verdict.reason or f"rows from {run[0].seq} do not follow row {head.seq}"
        raise LedgerError(f"the archive's rows of {table} do not form a chain: {why}")
    return verdict.head


def restore(
    rows: Iterable[Row], table: str, out: Path, *, prefix: str = "progressive"
) -> Restored:
    """Write ``rows`` (the archive's, in order) as a new ledger file at ``out``."""
    runs = _checked(table, rows)
    first = next(runs, None)
    if first is None:
        raise LedgerMissing(f"the archive holds no row of table {table}")
    created = json.loads(first[0].data) if first[0].kind == "ledger_created" else {}
    software = str(created.get("software", ""))
    store, _meta = opening.open_file(out, table, first[0].at, software, "new")
    done = Restored(table, out)
    derived = _Derived(table, prefix)
    try:
        pending = _Rows()
        for run in (first, *runs):
            for row in run:
                derived.add(row, pending)
            last = run[-1]
            pending.head = _Head(last.seq, last.hash)
            done.rows += len(run)
            done.head = Head(last.seq, last.hash)
            if len(pending.journal) >= CHUNK:
                store.write(pending)
                pending = _Rows(head=pending.head)
        if pending.journal:
            store.write(pending)
        final = _Rows(head=pending.head)
        final.balances = [(a, units, seq) for a, (units, seq) in sorted(derived.balances.items())]
        final.snapshot = (done.head.seq, done.head.hash, snapshot.dumps(derived.state))
        extra = derived.link_outbox()
        meta: Mapping[str, str] = {"head_seq": str(done.head.seq), "head_hash": done.head.hash}
        store.write(final, meta=meta, extra=extra)
        done.link_outbox, done.link_seq = len(extra), derived.link_seq
    except BaseException:
        store.remove()
        raise
    store.close()
    return done
