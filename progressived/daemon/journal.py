"""The journal entry point: decide -> append -> apply, the one way state changes.

One lock serialises every write and ledger calls run on one dedicated thread, so the event
loop keeps serving heartbeats while SQLite waits for fsync and this object is the ledger's
only writer. A command is decided by the pure engine, journaled (events, postings, balances
and their outbox messages in one transaction) and only then takes effect: a failure to
journal leaves the state as it was and closes the progressive.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any, ParamSpec, TypeVar

import structlog

from progressived.clock import JournalClock
from progressived.daemon.health import Health
from progressived.daemon.link_out import LinkBook
from progressived.daemon.outbox import event_outbox, system_outbox
from progressived.daemon.port import Note
from progressived.daemon_config import DaemonConfig
from progressived.engine import LOCAL_BOOK, Accepted, Command, Lock, TableState, decide
from progressived.engine.meter_port import MeterAnswered, MeterPort
from progressived.ledger import Batch, Ledger, LedgerError, LedgerUnavailable, OutboxFn
from progressived.ledger.commit import Statement
from progressived.ledger.rows import Record
from progressived.metrics import HitCounts, TableMetrics
from progressived.mqtt.payloads import Topics
from progressived.params import TableParams

log = structlog.get_logger("progressived")

P = ParamSpec("P")
T = TypeVar("T")

LinkResultFn = Callable[
    [TableState, str],
    Awaitable[tuple[MeterAnswered | None, list[Record], list[Statement]] | None],
]
Notify = Callable[[str, Mapping[str, Any]], None]
"""Tells observers (tests, the demo) what happened: ``applied``, ``rejected``, ``key``..."""


class Journal:
    """The table's state and the only writer of its ledger."""

    def __init__(
        self,
        config: DaemonConfig,
        topics: Topics,
        health: Health,
        clock: Callable[[], str],
        notify: Notify,
    ) -> None:
        self.config = config
        self.topics = topics
        self.health = health
        self.clock = clock
        self.journal_clock = JournalClock(clock)
        self.notify = notify
        self.lock = asyncio.Lock()
        self.ledger: Ledger
        self.state = TableState()
        self.last_write = time.monotonic()
        self.metrics: TableMetrics | None = None
        self.hits = HitCounts()
        self.key_started: dict[int, float] = {}
        self.changed: Callable[[], None] = lambda: None
        """Called after every change of state or ledger health (the outputs redraw)."""
        self.wake: Callable[[], None] = lambda: None
        """Called after a write that queued outbox messages (the publisher wakes)."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")
        # A table with linked meters (issue 13): the linked port, and the link's side of
        # each decision (messages into the link outbox, in the decision's transaction).
        self.meter_port: MeterPort = LOCAL_BOOK
        self.link_book: LinkBook | None = None
        self.link_wake: Callable[[], None] = lambda: None
        self.linked_meters: dict[str, Any] = {}  # the link's meter view (LinkedMeter)

    @property
    def params(self) -> TableParams:
        return self.config.params

    # ------------------------------------------------------------- the ledger thread
    async def db(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a ledger call on the ledger thread.

        A write's time (its ``at``) is stamped here, as the call is queued: the one ledger
        thread runs calls in this order and gives rows their ``seq`` in it, so ``ts`` never
        runs backwards against ``seq`` whenever the caller read the clock.
        """
        if isinstance(kwargs.get("at"), str):
            kwargs["at"] = self.journal_clock.stamp(str(kwargs["at"]))
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, partial(fn, *args, **kwargs))

    async def commit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A ledger write on the ledger thread, timed for the commit histogram."""
        started = time.perf_counter()
        result = await self.db(fn, *args, **kwargs)
        if self.metrics is not None:
            self.metrics.commit.labels(self.params.table_id).observe(time.perf_counter() - started)
        return result

    def close_thread(self) -> None:
        self._executor.shutdown(wait=True)

    def system_outbox(self, kind: str, detail: Mapping[str, Any]) -> OutboxFn:
        return system_outbox(self.topics, self.params.table_id, kind, detail)

    # ------------------------------------------------------------- records
    async def record(
        self,
        kind: str,
        detail: Mapping[str, Any],
        *,
        publish: bool = True,
        actor: str = "system",
        idempotency_key: str | None = None,
    ) -> bool:
        """Journal a system event (and tell the signs). False if the ledger is unavailable."""
        try:
            await self.commit(
                self.ledger.record,
                kind,
                dict(detail),
                at=self.clock(),
                actor=actor,
                round=self.state.round,
                idempotency_key=idempotency_key,
                outbox=self.system_outbox(kind, detail) if publish else None,
            )
        except LedgerUnavailable as exc:
            await self.ledger_failed(exc)
            return False
        self.last_write = time.monotonic()
        self.wake()
        return True

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
        if self.link_book is not None and idempotency_key is not None:
            seen = await self.db(self.ledger.lookup, str(idempotency_key))
        if self.link_book is not None and seen is None:
            head = (self.ledger.head_seq, self.ledger.head_hash)
            link = self.link_book.outgoing(
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
        if link is not None and self.link_book is not None:
            self.link_book.committed(link)
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
        the deletion of its outbox row and the engine's answer (if the round awaits one).
        ``build(state, at)`` makes them from the state as it stands under the lock; it
        returns ``None`` for a result already journaled (a repeat: nothing is written)."""
        async with self.lock:
            at = self.journal_clock.stamp(self.clock())
            built = await build(self.state, at)
            if built is None:
                return False
            answer, records, statements = built
            items: list[Batch | Record] = []
            decision: Accepted | None = None
            if answer is not None:
                decided = decide(self.params, self.state, replace(answer, at=at), self.meter_port)
                if isinstance(decided, Accepted):
                    decision = decided
                else:
                    log.error("the link's answer does not fit the round", reason=decided.reason)
                if decision is not None and decision.events:
                    items.append(Batch(decision.events, decision.state, at, "link", None,
                                       event_outbox(self.topics, self.params.table_id,
                                                    decision.events)))  # fmt: skip
            items += records
            try:
                await self.commit(self.ledger.transact, items, statements)
            except LedgerUnavailable as exc:
                await self.ledger_failed(exc)
                return False
            self.last_write = time.monotonic()
            if decision is not None and decision.events:
                self.state = decision.state
                self.hits.count(decision.events)
                self.notify("applied", {"events": decision.events})
            self.wake()
            self.changed()
            return True

    def _note_record(self, note: Note, at: str) -> Record:
        category = "operator" if note.kind.startswith("operator") else "system"
        return Record(
            note.kind,
            dict(note.detail),
            at,
            note.actor,
            self.state.round,
            0,
            category,
            None,
            self.system_outbox(note.kind, note.detail),
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

    async def ledger_failed(self, exc: LedgerError) -> None:
        if self.health.ledger_ok:
            log.error("ledger unavailable: the progressive is closed", error=str(exc))
        self.health.ledger_ok = False
        self.health.last_error = str(exc)
        self.changed()

    async def reconfigure_locked(
        self, config: DaemonConfig, detail: Mapping[str, Any], *, actor: str
    ) -> str | None:
        """Journal ``parameter_changed`` (``detail``), then take ``config``; the caller holds
        :attr:`lock` and has checked the change. None, or why it was not journaled."""
        try:
            await self.commit(
                self.ledger.record,
                "parameter_changed",
                dict(detail),
                at=self.clock(),
                actor=actor,
                round=self.state.round,
                outbox=self.system_outbox("parameter_changed", detail),
            )
        except LedgerError as exc:
            return f"not journaled: {exc}"
        self.last_write = time.monotonic()
        self.config = config
        return None

    # ------------------------------------------------------------- open / close
    async def open(self, version: str) -> None:
        """Open the ledger (recovering the round in progress)."""
        # create=False: a missing ledger is never an empty one (`progressived init` makes it).
        self.ledger = await self.db(
            Ledger.open,
            self.config.ledger.path,
            self.params,
            at=self.clock(),
            software=version,
            create=False,
        )
        self.state = self.ledger.state

    async def retry(self) -> bool:
        """Try an unavailable ledger again by journaling its recovery. True if it worked."""
        async with self.lock:
            try:
                await self.db(
                    self.ledger.record,
                    "ledger_recovered",
                    {"error": self.health.last_error},
                    at=self.clock(),
                    actor="system",
                )
            except LedgerError:
                return False
            self.health.ledger_ok = True
            log.info("ledger available again")
            self.changed()
            return True

    async def outbox_empty(self) -> bool:
        return not await self.db(self.ledger.outbox_pending, 1)
