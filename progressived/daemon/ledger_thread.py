"""The journal's lower half: the ledger thread, system records, the ledger's health.

Split from :mod:`progressived.daemon.journal` so that module stays about commands (decide
-> append -> apply, a note in the same transaction, the link's results) and this one about
what every write shares: the one dedicated ledger thread (a write's time stamped as it is
queued), the commit histogram, journaling a system or parameter event, opening the ledger,
and what happens when it refuses writes (the progressive closes) and when it takes them
again. :class:`LedgerThread` holds the table's state and the one lock; only
:class:`~progressived.daemon.journal.Journal` is built.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, ParamSpec, TypeVar

import structlog

from progressived.config.daemon import DaemonConfig
from progressived.core.params import TableParams
from progressived.daemon.health import Health
from progressived.daemon.metrics import TableMetrics
from progressived.daemon.outbox import system_outbox
from progressived.engine import TableState
from progressived.ledger import Ledger, LedgerError, LedgerUnavailable, OutboxFn
from progressived.mqtt.payloads import Topics
from progressived.runtime.clock import JournalClock

log = structlog.get_logger("progressived")

P = ParamSpec("P")
T = TypeVar("T")


class LedgerThread:
    """The table's state, its ledger and the one thread and lock every write goes through."""

    def __init__(
        self, config: DaemonConfig, topics: Topics, health: Health, clock: Callable[[], str]
    ) -> None:
        self.config = config
        self.topics = topics
        self.health = health
        self.clock = clock
        self.journal_clock = JournalClock(clock)
        self.lock = asyncio.Lock()
        self.ledger: Ledger
        self.state = TableState()
        self.last_write = time.monotonic()
        self.metrics: TableMetrics | None = None
        self.changed: Callable[[], None] = lambda: None
        """Called after every change of state or ledger health (the outputs redraw)."""
        self.wake: Callable[[], None] = lambda: None
        """Called after a write that queued outbox messages (the publisher wakes)."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")

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
