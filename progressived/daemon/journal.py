"""The journal entry point: decide -> append -> apply, the one way state changes.

One lock serialises every write and ledger calls run on the one ledger thread
(:class:`~progressived.daemon.ledger_executor.LedgerExecutor`), so the event loop keeps
serving heartbeats while SQLite waits for fsync and this object is the ledger's only
writer. A command is decided by the pure engine, journaled (events, postings, balances and
their outbox messages in one transaction) and only then takes effect: a failure to journal
leaves the state as it was and closes the progressive.

Everything the journal needs is given at construction: the ledger already open (in
:class:`~progressived.daemon.current.CurrentTable`), the executor, its observers, the
link's outbox for a table with linked meters. :meth:`Journal.submit` returns what
happened (:class:`~progressived.daemon.port.Committed` or
:class:`~progressived.daemon.port.CommandRefused`); nothing reads its attributes to find out.
System records, the commit, the ledger's failure and recovery, and parameter changes are
:mod:`progressived.daemon.ledger_writer`'s.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog

from progressived.daemon.ledger_writer import LedgerWriter
from progressived.daemon.link_out import LinkOutbox, Outgoing
from progressived.daemon.outbox import event_outbox
from progressived.daemon.port import CommandRefused, Committed, Note, RefusalCode, Submitted
from progressived.engine import LOCAL_BOOK, Accepted, Command, Lock, SetClosed, TableState, decide
from progressived.engine.decision import Decision, RejectCode
from progressived.engine.events import Event
from progressived.engine.meter_port import MeterAnswered, MeterPort
from progressived.engine.meterbook.linked_port import LINKED_PORT
from progressived.ledger import Batch, LedgerUnavailable
from progressived.ledger.link_outbox import LinkMessageRow, LinkOutboxChange, LinkOutboxDepth
from progressived.ledger.rows import Record
from progressived.ledger.slip_reads import PrintJob

log = structlog.get_logger("progressived")

LinkAnswer = tuple[MeterAnswered | None, list[Record], list[LinkOutboxChange], str | None]
"""A final result journaled: the engine's answer, rows, link outbox changes, and the reason to close
the linked progressive (a refusal resending cannot cure), or ``None``."""
LinkResultFn = Callable[[TableState, str], Awaitable[LinkAnswer | None]]

LOCK_REFUSED = "the ledger is unavailable: LOCK refused"
DUPLICATE = "already applied (the same input was journaled before)"
NOTE_NOT_JOURNALED = "the ledger is unavailable"


@dataclass(frozen=True, slots=True)
class LinkSide:
    """A table with linked meters (docs/link.md): the link outbox's sequencer, whose
    messages go into each decision's transaction, and who sends them (woken after)."""

    outbox: LinkOutbox
    queued: Callable[[], None]


class Journal:
    """The only writer of the table's state: commands decided by the engine and journaled
    with their outbox messages, through the :class:`LedgerWriter` it is given."""

    def __init__(self, *, writer: LedgerWriter, link: LinkSide | None = None) -> None:
        self.writer = writer
        self.current = writer.current
        self.observers = writer.observers
        self.lock = writer.lock
        self.journal_clock = writer.executor.journal_clock
        self.record = writer.record  # a system event journaled (not a command)
        self._link = link
        self._meter_port: MeterPort = LINKED_PORT if link is not None else LOCAL_BOOK

    @property
    def state(self) -> TableState:
        return self.current.state

    def clock(self) -> str:
        """The time for a new command (UTC, ISO 8601)."""
        return self.writer.clock()

    async def link_outbox(self, after_seq: int = 0) -> list[LinkMessageRow]:
        """The link outbox's messages after ``after_seq`` (on the ledger thread)."""
        return await self.writer.executor.run(self.current.ledger.link_outbox, after_seq)

    async def link_message(self, seq: int) -> LinkMessageRow | None:
        """The link outbox's message of sequence ``seq``, if it still waits."""
        return await self.writer.executor.run(self.current.ledger.link_message, seq)

    async def link_outbox_depth(self) -> LinkOutboxDepth:
        """The link outbox's depth and its oldest message's payload."""
        return await self.writer.executor.run(self.current.ledger.link_outbox_depth)

    async def link_sent_since(self, round_no: int) -> list[dict[str, Any]]:
        """The ``link_sent`` rows' data from round ``round_no`` on (and the last one)."""
        return await self.writer.executor.run(self.current.ledger.link_sent_since, round_no)

    async def slip_print_queue(self) -> list[PrintJob]:
        """The payout slip copies waiting to print (on the ledger thread)."""
        return await self.writer.executor.run(self.current.ledger.slip_print_queue)

    async def slip_rows_head(self) -> int:
        """The last payout slip row's ``seq`` (0 when none)."""
        return await self.writer.executor.run(self.current.ledger.slip_rows_head)

    async def slip_copies(self, serial: str) -> dict[str, int]:
        """``slip_issued`` and ``slip_reprint`` rows naming ``serial``, counted by kind."""
        return await self.writer.executor.run(self.current.ledger.slip_copies, serial)

    # ------------------------------------------------------------- commands
    async def submit(
        self,
        command: Command | MeterAnswered,
        *,
        idempotency_key: str | None = None,
        started: float | None = None,
        note: Note | None = None,
    ) -> Submitted:
        """Decide, journal, then take effect.

        A ``note`` is journaled with the command's events in one transaction (all or none).
        ``started`` (perf_counter) is when the key press that caused it arrived, for the
        key-to-publish histogram.
        """
        async with self.lock:
            return await self._submit_locked(command, idempotency_key, started, note)

    def _key_spans(
        self, started: float | None, marks: tuple[float, float, float, float], seqs: range
    ) -> None:
        """A key press's spans in the daemon, logged for the latency budget
        (bench/latency_budget.py): waiting (keypad and the journal's lock), engine, plan,
        commit (the ledger thread: queue, transaction and fsync) and observers (event log
        lines, listeners, the outputs' redraw that wakes the publisher), in milliseconds."""
        if started is None or not seqs:
            return
        locked, decided, planned, committed = marks
        log.info(
            "key journaled",
            seq=seqs.start,
            last_seq=seqs[-1],
            wait_ms=round((locked - started) * 1e3, 3),
            engine_ms=round((decided - locked) * 1e3, 3),
            plan_ms=round((planned - decided) * 1e3, 3),
            commit_ms=round((committed - planned) * 1e3, 3),
            observers_ms=round((time.perf_counter() - committed) * 1e3, 3),
        )

    async def _submit_locked(
        self,
        command: Command | MeterAnswered,
        idempotency_key: str | None,
        started: float | None,
        note: Note | None,
    ) -> Submitted:
        # Stamp the note, then the command's time, in journal order now (no await before
        # the write is queued, so no other write can come between).
        locked = time.perf_counter()
        note_at = self.journal_clock.stamp(self.clock()) if note is not None else ""
        command = replace(command, at=self.journal_clock.stamp(command.at))
        if isinstance(command, Lock) and not self.writer.health.ledger_ok:
            await self._noted(note, note_at)
            await self.refuse(LOCK_REFUSED, RefusalCode.LEDGER_UNAVAILABLE, command)
            return CommandRefused(code=RefusalCode.LEDGER_UNAVAILABLE, reason=LOCK_REFUSED)
        decision = decide(self.current.params, self.state, command, self._meter_port)
        decided = time.perf_counter()
        if not isinstance(decision, Accepted) or not decision.events:
            if not await self._noted(note, note_at):
                return CommandRefused(
                    code=RefusalCode.LEDGER_UNAVAILABLE, reason=NOTE_NOT_JOURNALED
                )
            if isinstance(decision, Accepted):
                return Committed(events=(), seqs=range(0))
            await self.refuse(decision.reason, decision.code, command, idempotency_key)
            return CommandRefused(code=RefusalCode.REJECTED, reason=decision.reason)
        items = self._items(command, decision, idempotency_key, note, note_at)
        link = await self._link_messages(command, decision, idempotency_key)
        planned = time.perf_counter()
        try:
            results = await self.writer.commit(
                self.current.ledger.transact,
                [*items, *(link.records if link is not None else ())],
                link.changes if link is not None else (),
            )
        except LedgerUnavailable as exc:
            await self.writer.failed(exc)
            return CommandRefused(
                code=RefusalCode.LEDGER_UNAVAILABLE, reason=f"not journaled: {exc}"
            )
        committed = time.perf_counter()
        if results[-1].duplicate:
            log.info("duplicate input ignored", key=idempotency_key)
            return CommandRefused(code=RefusalCode.DUPLICATE, reason=DUPLICATE)
        self.current.state = decision.state
        if link is not None and self._link is not None:
            self._link.outbox.committed(link)
            if link.records:
                self._link.queued()
        structlog.contextvars.bind_contextvars(round=self.state.round)
        seqs = range(results[-1].first_seq, results[-1].last_seq + 1)
        self.observers.committed(decision.events, seqs, started)
        self.observers.changed()
        self._key_spans(started, (locked, decided, planned, committed), seqs)
        return Committed(events=decision.events, seqs=seqs, link=link)

    def _items(
        self,
        command: Command | MeterAnswered,
        decision: Accepted,
        idempotency_key: str | None,
        note: Note | None,
        note_at: str,
    ) -> list[Batch | Record]:
        """The decision's rows (after its note's, if any) and their sign messages."""
        batch = Batch(
            decision.events,
            decision.state,
            command.at,
            command.actor,
            idempotency_key,
            event_outbox(self.writer.topics, self.current.params.table_id, decision.events),
        )
        return [batch] if note is None else [self.note_record(note, note_at), batch]

    async def _link_messages(
        self, command: Command | MeterAnswered, decision: Accepted, idempotency_key: str | None
    ) -> Outgoing | None:
        """The link outbox messages the decision makes (none on a table without linked
        meters, and none for an input journaled before: they went with it then)."""
        if self._link is None:
            return None
        if idempotency_key is not None:
            seen = await self.writer.executor.run(self.current.ledger.lookup, idempotency_key)
            if seen is not None:
                return None
        head = (self.current.ledger.head_seq, self.current.ledger.head_hash)
        return self._link.outbox.outgoing(
            self.state, decision.state, decision.events, command.actor, command.at, head
        )

    # ------------------------------------------------------------- the link's results
    async def link_result(self, build: LinkResultFn) -> bool:
        """Journal a final result from the link in one transaction: its ``link_result`` row,
        the deletion of its outbox row, the engine's answer (if the round awaits one) and,
        for a refusal resending cannot cure, the closing of the linked progressive.
        ``build(state, at)`` makes them from the state as it stands under the lock; it
        returns ``None`` for a result already journaled (a repeat: nothing is written)."""
        async with self.lock:
            at = self.journal_clock.stamp(self.clock())
            built = await build(self.state, at)
            if built is None:
                return False
            answer, records, changes, close = built
            commands: list[Command | MeterAnswered] = [] if answer is None else [answer]
            if close is not None:
                commands.append(SetClosed(reason=close, closed=True, at=at, actor="link"))
            items, state, events = self._answers(commands, at)
            try:
                await self.writer.commit(self.current.ledger.transact, [*items, *records], changes)
            except LedgerUnavailable as exc:
                await self.writer.failed(exc)
                return False
            if events:
                self.current.state = state
                self.observers.answered(events)
            self.observers.queued()
            self.observers.changed()
            return True

    def _answers(
        self, commands: Sequence[Command | MeterAnswered], at: str
    ) -> tuple[list[Batch | Record], TableState, list[Event]]:
        """The link's answer and closing, decided one after the other on the current state."""
        items: list[Batch | Record] = []
        state, events = self.state, list[Event]()
        for command in commands:
            decided: Decision = decide(
                self.current.params, state, replace(command, at=at), self._meter_port
            )
            if not isinstance(decided, Accepted):
                log.error("the link's answer does not fit the round", reason=decided.reason)
                continue
            if decided.events:
                outbox = event_outbox(
                    self.writer.topics, self.current.params.table_id, decided.events
                )
                items.append(Batch(decided.events, decided.state, at, "link", None, outbox))
                state, events = decided.state, [*events, *decided.events]
        return items, state, events

    # ------------------------------------------------------------- notes and refusals
    def note_record(self, note: Note, at: str) -> Record:
        category = "operator" if note.kind.startswith("operator") else "system"
        return Record(
            kind=note.kind,
            detail=dict(note.detail),
            at=at,
            actor=note.actor,
            round=self.state.round,
            category=category,
            outbox=self.writer.system_outbox(note.kind, note.detail),
        )

    async def _noted(self, note: Note | None, at: str) -> bool:
        """Journal a note on its own (its command wrote nothing). False if that failed."""
        if note is None:
            return True
        try:
            await self.writer.commit(self.current.ledger.transact, [self.note_record(note, at)])
        except LedgerUnavailable as exc:
            await self.writer.failed(exc)
            return False
        self.observers.queued()
        return True

    async def refuse(
        self,
        reason: str,
        code: RejectCode | RefusalCode,
        command: Command | MeterAnswered,
        idempotency_key: str | None = None,
    ) -> None:
        """Tell and count a refusal, and journal it (``command_rejected``) if the ledger
        takes writes."""
        name = type(command).__name__
        self.observers.rejected(reason, code, name, self.state.round)
        if self.writer.health.ledger_ok:
            await self.record(
                "command_rejected",
                {"command": name, "reason": reason, "code": code},
                actor=command.actor,
                idempotency_key=idempotency_key,
            )
