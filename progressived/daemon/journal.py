"""The journal entry point: decide -> append -> apply, the one way state changes.

One lock serialises every write and ledger calls run on one dedicated thread, so the event
loop keeps serving heartbeats while SQLite waits for fsync and this object is the ledger's
only writer. A command is decided by the pure engine, journaled (events, postings, balances
and their outbox messages in one transaction) and only then takes effect: a failure to
journal leaves the state as it was and closes the progressive.

The ledger thread, system records and the ledger's health are the lower half,
:mod:`progressived.daemon.ledger_thread` (split off to keep each module about one thing).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

import structlog

from progressived.config.daemon import DaemonConfig
from progressived.daemon.health import Health
from progressived.daemon.ledger_thread import LedgerThread
from progressived.daemon.link_out import LinkOutbox
from progressived.daemon.metrics import HitCounts
from progressived.daemon.outbox import event_outbox
from progressived.daemon.port import Note
from progressived.engine import (
    LOCAL_BOOK,
    Accepted,
    Command,
    Lock,
    SetClosed,
    TableState,
    decide,
)
from progressived.engine.events import Event
from progressived.engine.meter_port import MeterAnswered, MeterPort
from progressived.ledger import Batch, LedgerUnavailable
from progressived.ledger.commit import Statement
from progressived.ledger.rows import Record
from progressived.mqtt.payloads import Topics

log = structlog.get_logger("progressived")

LinkAnswer = tuple[MeterAnswered | None, list[Record], list[Statement], str | None]
"""A final result journaled: the engine's answer, rows, statements, and the reason to close
the linked progressive (a refusal resending cannot cure), or ``None``."""
LinkResultFn = Callable[[TableState, str], Awaitable[LinkAnswer | None]]
Notify = Callable[[str, Mapping[str, Any]], None]
"""Tells observers (tests, the demo) what happened: ``applied``, ``rejected``, ``key``..."""


class Journal(LedgerThread):
    """The table's state and the only writer of its ledger: commands decided by the engine
    and journaled with their outbox messages (the ledger thread, system records and the
    ledger's health are :class:`~progressived.daemon.ledger_thread.LedgerThread`'s)."""

    def __init__(
        self,
        config: DaemonConfig,
        topics: Topics,
        health: Health,
        clock: Callable[[], str],
        notify: Notify,
    ) -> None:
        super().__init__(config, topics, health, clock)
        self.notify = notify
        self.hits = HitCounts()
        self.key_started: dict[int, float] = {}
        # A table with linked meters (docs/link.md): the linked port, and the link's side of
        # each decision (messages into the link outbox, in the decision's transaction).
        self.meter_port: MeterPort = LOCAL_BOOK
        self.link_outbox: LinkOutbox | None = None
        self.link_wake: Callable[[], None] = lambda: None
        self.linked_meters: dict[str, Any] = {}  # the link's meter view (LinkedMeter)

    # ------------------------------------------------------------- commands
    async def apply(
        self, command: Command, *, idempotency_key: str | None = None, started: float | None = None
    ) -> bool:
        """Decide, journal, then take effect. Returns whether the command was applied.

        ``started`` (perf_counter) is when the key press that caused it arrived, for the
        key-to-publish histogram.
        """
        return (
            await self.submit(command, idempotency_key=idempotency_key, started=started)
        ) is None

    async def submit(
        self,
        command: Command | MeterAnswered,
        *,
        idempotency_key: str | None = None,
        started: float | None = None,
        note: Note | None = None,
    ) -> str | None:
        """As :meth:`apply`, returning ``None`` when applied, else why not.

        A ``note`` is journaled with the command's events in one transaction (all or none).
        """
        async with self.lock:
            return await self._submit_locked(command, idempotency_key, started, note)

    async def _submit_locked(
        self,
        command: Command | MeterAnswered,
        idempotency_key: str | None = None,
        started: float | None = None,
        note: Note | None = None,
    ) -> str | None:
        # Stamp the note, then the command's time, in journal order now (no await before
        # the write is queued, so no other write can come between).
        note_at = self.journal_clock.stamp(self.clock()) if note is not None else ""
        command = replace(command, at=self.journal_clock.stamp(command.at))
        if isinstance(command, Lock) and not self.health.ledger_ok:
            why = "the ledger is unavailable: LOCK refused"
            await self._noted(note, note_at)
            await self.refuse(why, "ledger-unavailable", command)
            return why
        decision = decide(self.params, self.state, command, self.meter_port)
        if not decision.accepted:
            if not await self._noted(note, note_at):
                return "the ledger is unavailable"
            await self.refuse(decision.reason, decision.code, command, idempotency_key)
            return decision.reason
        if not decision.events:
            return None if await self._noted(note, note_at) else "the ledger is unavailable"
        items: list[Batch | Record] = []
        if note is not None:
            items.append(self._note_record(note, note_at))
        items.append(
            Batch(
                decision.events,
                decision.state,
                command.at,
                command.actor,
                idempotency_key,
                event_outbox(self.topics, self.params.table_id, decision.events),
            )
        )
        link = None
        seen = None
        if self.link_outbox is not None and idempotency_key is not None:
            seen = await self.db(self.ledger.lookup, str(idempotency_key))
        if self.link_outbox is not None and seen is None:
            head = (self.ledger.head_seq, self.ledger.head_hash)
            link = self.link_outbox.outgoing(
                self.state, decision.state, decision.events, command.actor, command.at, head
            )
            items += link.records
        try:
            results = await self.commit(
                self.ledger.transact, items, link.statements if link is not None else ()
            )
        except LedgerUnavailable as exc:
            await self.ledger_failed(exc)
            return "the ledger is unavailable" if note is not None else f"not journaled: {exc}"
        result = results[-1]
        self.last_write = time.monotonic()
        if result.duplicate:
            log.info("duplicate input ignored", key=idempotency_key)
            return "already applied (the same input was journaled before)"
        self.state = decision.state
        if link is not None and self.link_outbox is not None:
            self.link_outbox.committed(link)
            if link.records:
                self.link_wake()
        structlog.contextvars.bind_contextvars(round=self.state.round)
        self.hits.count(decision.events)
        if self.metrics is not None:
            self.metrics.count(decision.events)
        if started is not None and result.last_seq >= result.first_seq:
            # the first outbox message of this command carries one of these seqs
            for seq in range(result.first_seq, result.last_seq + 1):
                self.key_started[seq] = started
            if len(self.key_started) > 10_000:
                self.key_started.clear()
        for event in decision.events:
            log.info(
                "event",
                kind=event.kind,
                table=self.params.table_id,
                round=event.round,
                seat=event.seat or None,
            )
        self.notify("applied", {"events": decision.events})
        self.changed()
        return None

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
            answer, records, statements, close = built
            items: list[Batch | Record] = []
            state, events = self.state, list[Event]()
            commands: list[Command | MeterAnswered] = [] if answer is None else [answer]
            if close is not None:
                commands.append(SetClosed(reason=close, closed=True, at=at, actor="link"))
            for command in commands:
                decided = decide(self.params, state, replace(command, at=at), self.meter_port)
                if not isinstance(decided, Accepted):
                    log.error("the link's answer does not fit the round", reason=decided.reason)
                    continue
                if decided.events:
                    items.append(Batch(decided.events, decided.state, at, "link", None,
                                       event_outbox(self.topics, self.params.table_id,
                                                    decided.events)))  # fmt: skip
                    state, events = decided.state, [*events, *decided.events]
            items += records
            try:
                await self.commit(self.ledger.transact, items, statements)
            except LedgerUnavailable as exc:
                await self.ledger_failed(exc)
                return False
            self.last_write = time.monotonic()
            if events:
                self.state = state
                self.hits.count(events)
                self.notify("applied", {"events": tuple(events)})
            self.wake()
            self.changed()
            return True

    def _note_record(self, note: Note, at: str) -> Record:
        category = "operator" if note.kind.startswith("operator") else "system"
        return Record(
            kind=note.kind,
            detail=dict(note.detail),
            at=at,
            actor=note.actor,
            round=self.state.round,
            category=category,
            outbox=self.system_outbox(note.kind, note.detail),
        )

    async def _noted(self, note: Note | None, at: str) -> bool:
        """Journal a note on its own (its command wrote nothing). False if that failed."""
        if note is None:
            return True
        try:
            await self.commit(self.ledger.transact, [self._note_record(note, at)])
        except LedgerUnavailable as exc:
            await self.ledger_failed(exc)
            return False
        self.last_write = time.monotonic()
        self.wake()
        return True

    async def refuse(
        self,
        reason: str,
        code: str,
        command: Command | MeterAnswered,
        idempotency_key: str | None = None,
    ) -> None:
        log.warning(
            "command rejected",
            reason=reason,
            code=code,
            command=type(command).__name__,
            table=self.params.table_id,
            round=self.state.round,
        )
        self.notify("rejected", {"reason": reason, "code": code})
        if self.metrics is not None:
            self.metrics.rejected.labels(self.params.table_id, code).inc()
        if self.health.ledger_ok:
            await self.record(
                "command_rejected",
                {"command": type(command).__name__, "reason": reason, "code": code},
                actor=command.actor,
                idempotency_key=idempotency_key,
            )
