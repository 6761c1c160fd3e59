"""What every write to the table's ledger shares: the lock, the commit, system records, health.

The journal (:mod:`progressived.daemon.journal`) is about commands (decide -> append ->
apply, a note in the same transaction, the link's results); this is what it and the other
parts write through: a transaction on the ledger thread timed for the commit histogram,
journaling a system or parameter event, what happens when the ledger refuses writes (the
progressive closes) and when it takes them again, and the WAL checkpoint when idle. The
journal is given one (composition, not a base class).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

import structlog

from progressived.config.daemon import DaemonConfig
from progressived.daemon.current import CurrentTable
from progressived.daemon.health import Health
from progressived.daemon.ledger_executor import LedgerExecutor
from progressived.daemon.observers import JournalObservers
from progressived.daemon.outbox import system_outbox
from progressived.ledger import LedgerError, LedgerUnavailable, OutboxFn
from progressived.mqtt.payloads import Topics

log = structlog.get_logger("progressived")

P = ParamSpec("P")
T = TypeVar("T")


class LedgerWriter:
    """Writes to the open ledger on its thread and keeps its health; holds the one lock
    every command, parameter change and recovery is journaled under."""

    def __init__(
        self,
        *,
        current: CurrentTable,
        executor: LedgerExecutor,
        topics: Topics,
        health: Health,
        clock: Callable[[], str],
        observers: JournalObservers,
    ) -> None:
        self.current = current
        self.executor = executor
        self.topics = topics
        self.health = health
        self.clock = clock
        self.observers = observers
        self.lock = asyncio.Lock()
        self._last_write = time.monotonic()

    async def commit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A ledger write on the ledger thread, timed for the commit histogram."""
        started = time.perf_counter()
        result = await self.executor.run(fn, *args, **kwargs)
        self.observers.commit_took(time.perf_counter() - started)
        self._last_write = time.monotonic()
        return result

    def system_outbox(self, kind: str, detail: Mapping[str, Any]) -> OutboxFn:
        return system_outbox(self.topics, self.current.params.table_id, kind, detail)

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
                self.current.ledger.record,
                kind,
                dict(detail),
                at=self.clock(),
                actor=actor,
                round=self.current.state.round,
                idempotency_key=idempotency_key,
                outbox=self.system_outbox(kind, detail) if publish else None,
            )
        except LedgerUnavailable as exc:
            await self.failed(exc)
            return False
        self.observers.queued()
        return True

    async def failed(self, exc: LedgerError) -> None:
        """The ledger refused a write: the progressive closes until it takes one again."""
        if self.health.ledger_ok:
            log.error("ledger unavailable: the progressive is closed", error=str(exc))
        self.health.ledger_ok = False
        self.health.last_error = str(exc)
        self.observers.changed()

    async def reconfigure_locked(
        self, config: DaemonConfig, detail: Mapping[str, Any], *, actor: str
    ) -> str | None:
        """Journal ``parameter_changed`` (``detail``), then take ``config``; the caller holds
        :attr:`lock` and has checked the change. None, or why it was not journaled."""
        try:
            await self.commit(
                self.current.ledger.record,
                "parameter_changed",
                dict(detail),
                at=self.clock(),
                actor=actor,
                round=self.current.state.round,
                outbox=self.system_outbox("parameter_changed", detail),
            )
        except LedgerError as exc:
            return f"not journaled: {exc}"
        self.current.config = config
        return None

    async def retry(self) -> bool:
        """Try an unavailable ledger again by journaling its recovery. True if it worked."""
        async with self.lock:
            try:
                await self.executor.run(
                    self.current.ledger.record,
                    "ledger_recovered",
                    {"error": self.health.last_error},
                    at=self.clock(),
                    actor="system",
                )
            except LedgerError:
                return False
            self.health.ledger_ok = True
            log.info("ledger available again")
            self.observers.changed()
            return True

    async def checkpoint_if_idle(self, idle_s: float) -> None:
        """Checkpoint the WAL after ``idle_s`` without a write (then wait as long again)."""
        if time.monotonic() - self._last_write >= idle_s:
            with contextlib.suppress(LedgerError):
                await self.executor.run(self.current.ledger.checkpoint)
            self._last_write = time.monotonic()

    async def outbox_empty(self) -> bool:
        return not await self.executor.run(self.current.ledger.outbox_pending, 1)
