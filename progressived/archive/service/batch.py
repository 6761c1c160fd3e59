"""One batch of the archive: messages in, rows to store, answers and alarms out.

Every message of the batch is decoded (bounded; a refusal has a code), checked against its
table's head as the batch has moved it so far (:func:`progressived.archive.core.chain.judge`)
and turned into what the batch stores (new rows per table, the heads after them, alarms)
and what it answers (one retained head per table, after the commit). Reading the archived
hashes of repeated rows is the one database read, given as ``hashes`` (on the database
thread, before the commit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from progressived.archive.core import chain, wire
from progressived.archive.core.chain import Head, Outcome
from progressived.archive.store.database import Alarm, TableWrite

Hashes = Callable[[str, int, int], dict[int, str]]

FORGED = "forged"
NOT_A_MEMBER = "not-a-member"


@dataclass(frozen=True, slots=True)
class Answer:
    table: str
    status: str  # ok, resend, refused
    code: str = ""
    reason: str = ""
    member: bool = True  # a member's answer is retained; a stranger's is not


@dataclass
class Batch:
    """What one batch stores and answers."""

    heads: dict[str, Head]  # every touched table's head after the batch
    writes: dict[str, list[wire.Row]] = field(default_factory=dict)
    alarms: list[Alarm] = field(default_factory=list)
    answers: dict[str, Answer] = field(default_factory=dict)
    refusals: list[tuple[str, str]] = field(default_factory=list)  # (table, code)
    repeats: int = 0
    resends: int = 0

    def table_writes(self) -> list[TableWrite]:
        return [
            TableWrite(table, tuple(rows), self.heads[table])
            for table, rows in self.writes.items()
            if rows
        ]

    def refuse(
        self, table: str, member: bool, code: str, reason: str, seq: int = 0, *, alarm: bool = False
    ) -> None:
        self.answers[table] = Answer(table, "refused", code, reason, member)
        self.refusals.append((table if member else "(not a member)", code))
        if alarm:
            self.alarms.append(Alarm(table, code, seq, reason))

    @property
    def rows(self) -> int:
        return sum(len(rows) for rows in self.writes.values())


def _archived(
    table: str, head: Head, committed: Head, pending: list[wire.Row], rows: tuple[wire.Row, ...],
    hashes: Hashes,
) -> dict[int, str]:
    """The archived hash of each row of ``rows`` at or below ``head``: from the database up
    to the committed head, from this batch's pending rows above it."""
    span = chain.repeated(head, rows)
    if span is None:
        return {}
    low, high = span
    found: dict[int, str] = {}
    if low <= committed.seq:
        found.update(hashes(table, low, min(high, committed.seq)))
    found.update({r.seq: r.hash for r in pending if low <= r.seq <= high})
    return found


def run_batch(
    messages: list[tuple[str, bytes]],
    committed: Mapping[str, Head],
    members: frozenset[str],
    hashes: Hashes,
) -> Batch:
    """Judge ``messages`` ((topic's table, payload), in arrival order per table)."""
    batch = Batch(heads={})
    for table, payload in messages:
        member = table in members
        try:
            message = wire.decode_rows(payload)
        except wire.ArchiveWireError as exc:
            batch.refuse(table, member, exc.code, exc.reason)
            continue
        if message.table != table:
            why = f"the message names table {message.table}, its topic {table}"
            batch.refuse(table, member, FORGED, why)
            continue
        if not member:
            why = f"{table} is not in the archive's [archive] tables"
            batch.refuse(table, member, NOT_A_MEMBER, why)
            continue
        base = committed.get(table, Head())
        head = batch.heads.setdefault(table, base)
        pending = batch.writes.setdefault(table, [])
        archived = _archived(table, head, base, pending, message.rows, hashes)
        verdict = chain.judge(head, table, message.rows, archived)
        if verdict.outcome is Outcome.STORE:
            pending.extend(verdict.fresh)
            batch.heads[table] = verdict.head
            batch.answers[table] = Answer(table, "ok")
        elif verdict.outcome is Outcome.REPEAT:
            batch.repeats += 1
            batch.answers.setdefault(table, Answer(table, "ok"))
        elif verdict.outcome is Outcome.RESEND:
            batch.resends += 1
            batch.answers[table] = Answer(table, "resend", "", verdict.reason)
        else:
            batch.refuse(table, member, verdict.code, verdict.reason, verdict.seq, alarm=True)
    return batch
