"""``progressived archive``: every table's rows from the broker into the archive's database.

One process is **active**: it holds the database's lease (the link ledger's lease rules,
:mod:`progressived.storage.postgres`), connects to the broker as the archive's account,
subscribes ``<prefix>/archive/+/rows``, judges each run of rows against its table's chain
(:mod:`progressived.archive.service.batch`), stores a batch in ONE transaction under the
lease's fence, and only then publishes each touched table's head, retained. Any other
process of the same file is a **standby**: connected to the database only, it tries the
lease every ``lease_s`` / 4 (at most a second) and serves once the lease lapses. An active
process that loses its lease (a write refused by the fence, or its own term passed without
a renewal: it was paused or cut off) publishes nothing more and exits with status 5;
systemd starts it again, as a standby (docs/archive.md, "One archive or two").
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

import aiomqtt
import structlog

from progressived.archive.core import wire
from progressived.archive.core.chain import Head
from progressived.archive.service.batch import Batch, run_batch
from progressived.archive.service.config import ArchiveConfig
from progressived.archive.service.lanes import Lanes
from progressived.archive.service.metrics import ArchiveMetrics
from progressived.archive.store.database import ArchiveStore
from progressived.mqtt.session import MqttSession
from progressived.mqtt.session_log import LoggedSession
from progressived.runtime.clock import utc_now
from progressived.runtime.lifecycle import Lifecycle
from progressived.storage.errors import Fenced, LeaseHeld, LedgerUnavailable
from progressived.storage.port import Lease

log = structlog.get_logger("progressived.archive")
P = ParamSpec("P")
T = TypeVar("T")
FENCED_EXIT = 5
ALARM_EVERY_S = 60.0  # a table's alarm of one code is journaled and logged this often


async def _unused(message: aiomqtt.Message) -> None:
    """Deliveries go to the intake (the lanes), never to a handler."""


class ArchiveService:
    """The archive process over its configuration."""

    def __init__(self, config: ArchiveConfig, *, clock: Callable[[], str] = utc_now) -> None:
        self.config = config
        self.clock = clock
        self.prefix = config.mqtt.prefix
        self.id = config.archive.id
        self.members = frozenset(config.archive.tables)
        self.lanes = Lanes(self.prefix, self.members, config.archive.lane_max)
        self.heads: dict[str, Head] = {}
        self.store: ArchiveStore | None = None
        self.lease: Lease | None = None
        self.active = False
        self.database_ok = False
        self.stored_rows = 0
        self.refusals: Counter[tuple[str, str]] = Counter()
        self.repeats = self.resends = 0
        self._alarmed: dict[tuple[str, str], float] = {}
        self._deadline = 0.0  # monotonic end of this process's own reckoning of its term
        self._stale = False  # a commit's outcome is unknown: read the heads again first
        self._wake = asyncio.Event()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="archive-db")
        self.lifecycle = Lifecycle(log, "archive task ended: stopping for a restart")
        options = config.mqtt.broker_options(
            f"progressived-{self.id}", default_username=self.id, max_inflight=200
        )
        self.session = MqttSession(options, observers=[LoggedSession("progressived.archive")])
        self.session.intake = self._intake
        self.session.gate = self.holds
        self.session.subscribe(wire.rows_filter(self.prefix), _unused)
        self.session.on_connect(self._republish)
        self.metrics = ArchiveMetrics(self)

    # ------------------------------------------------------------------ database thread
    async def db(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    def _open(self) -> ArchiveStore:
        d = self.config.database
        return ArchiveStore.open_archive(d.url, "existing", self.id, "", password=d.password())

    # ------------------------------------------------------------------ the lease
    def holds(self) -> bool:
        return self.active and time.monotonic() < self._deadline

    async def take_lease(self) -> None:
        """Standby until this process holds the lease (or a stop is asked)."""
        d = self.config.database
        poll = max(0.05, min(d.lease_s / 4, 1.0))
        said = ""
        while not self.lifecycle.stop.is_set():
            started = time.monotonic()
            try:
                if self.store is None:
                    self.store = await self.db(self._open)
                self.lease = await self.db(self.store.acquire, d.lease_holder(), d.lease_s)
            except LeaseHeld as exc:
                if said != "held":
                    log.info("standby: the archive is served by another process", lease=str(exc))
                said = "held"
            except LedgerUnavailable as exc:
                if said != "unreachable":
                    log.warning("standby: the archive's database cannot be reached", error=str(exc))
                said, self.database_ok = "unreachable", False
            else:
                self._deadline = started + d.lease_s
                self.heads = await self.db(self.store.heads)
                self.active = self.database_ok = True
                log.info("active: this process archives", token=self.lease.token,
                         tables=len(self.heads))
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(poll):
                    await self.lifecycle.stop.wait()

    def lose(self, why: str) -> None:
        if not self.active:
            return
        self.active = False
        log.error("archive lease lost: stopping (systemd starts it again as a standby)", why=why)
        self.lifecycle.fail(FENCED_EXIT)

    async def hold_lease(self) -> None:
        d = self.config.database
        while True:
            await asyncio.sleep(d.lease_s / 3)
            started = time.monotonic()
            assert self.store is not None
            assert self.lease is not None
            try:
                self.lease = await self.db(self.store.renew, self.lease)
            except Fenced as exc:
                self.lose(f"renewal refused: {exc}")
                return
            except LedgerUnavailable as exc:
                self.database_ok = False
                log.warning("archive lease not renewed", error=str(exc))
            else:
                self.database_ok = True
                self._deadline = max(self._deadline, started + d.lease_s)
            if not self.holds():
                self.lose(f"the lease was not renewed for its whole term ({d.lease_s} s)")
                return

    # ------------------------------------------------------------------ broker
    def _intake(self, topic: str, payload: bytes) -> None:
        if self.lanes.file(topic, payload):
            self._wake.set()

    async def _republish(self) -> None:
        """Every connection: each known head again (a broker restarted empty lost them)."""
        for table in sorted(self.heads):
            if table in self.members:
                await self._publish(table, "ok", "", "")

    async def _publish(
        self, table: str, status: str, code: str, reason: str, *, retain: bool = True
    ) -> None:
        if not self.holds() or not self.session.connected:
            return
        head = self.heads.get(table, Head())
        message = wire.HeadMessage(
            self.id, table, head.seq, head.hash, status, code, reason[:500], self.clock()
        )
        with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
            await self.session.publish(
                wire.head_topic(self.prefix, table), wire.encode_head(message), retain=retain
            )

    # ------------------------------------------------------------------ batches
    async def pump(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while messages := self.lanes.take(self.config.archive.batch_max):
                await self._batch(messages)

    async def _batch(self, messages: list[tuple[str, bytes]]) -> None:
        store, lease = self.store, self.lease
        assert store is not None
        assert lease is not None
        try:
            if self._stale:
                self.heads = await self.db(store.heads)
                self._stale = False
            batch = await self.db(run_batch, messages, dict(self.heads), self.members,
                                  store.hashes)
            self._alarm(batch)
            if batch.rows or batch.alarms:
                started = time.monotonic()
                await self.db(store.store, batch.table_writes(), batch.alarms, lease)
                self._deadline = max(self._deadline, started + self.config.database.lease_s)
        except Fenced as exc:
            self.lose(f"a write was refused by the fence: {exc}")
            return
        except LedgerUnavailable as exc:
            # Unknown outcome: nothing is answered (the tables send again) and the heads are
            # read again before the next batch, so a stored batch is then a repeat.
            self._stale, self.database_ok = True, False
            log.warning("archive batch not stored", error=str(exc), messages=len(messages))
            return
        self.database_ok = True
        self.heads.update(batch.heads)
        self.stored_rows += batch.rows
        self.repeats += batch.repeats
        self.resends += batch.resends
        for table, code in batch.refusals:
            self.refusals[(table, code)] += 1
        for answer in batch.answers.values():
            await self._publish(
                answer.table, answer.status, answer.code, answer.reason, retain=answer.member
            )

    def _alarm(self, batch: Batch) -> None:
        """A broken or rewritten chain: an error line (and its alarm row) at most once a
        minute per table and code; every refusal is counted."""
        now, kept = time.monotonic(), []
        for alarm in batch.alarms:
            key = (alarm.table, alarm.code)
            if now - self._alarmed.get(key, -ALARM_EVERY_S) >= ALARM_EVERY_S:
                self._alarmed[key] = now
                kept.append(alarm)
                log.error("archive refused a table's rows: its chain is not the archived one",
                          table=alarm.table, code=alarm.code, seq=alarm.seq, detail=alarm.detail)
        batch.alarms = kept

    # ------------------------------------------------------------------ life
    async def run(self, *, install_signals: bool = True) -> int:
        loop = asyncio.get_running_loop()
        if install_signals:
            self.lifecycle.install_signals(loop)
        try:
            m = self.config.metrics
            if m.enabled:
                self.metrics.serve(m.address, m.port)
            await self.take_lease()
            if not self.active:
                return self.lifecycle.status()
            tasks = [
                loop.create_task(self.session.run(), name="mqtt"),
                loop.create_task(self.pump(), name="pump"),
                loop.create_task(self.hold_lease(), name="lease"),
            ]
            self.lifecycle.watch(*tasks)
            await self.lifecycle.stop.wait()
            await self.session.stop()
            for task in tasks[1:]:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.active and self.store is not None and self.lease is not None:
                with contextlib.suppress(LedgerUnavailable, Fenced):
                    await self.db(self.store.release, self.lease)
            log.info(
                "archive stopped",
                tables=len(self.heads),
                stored_rows=self.stored_rows,
                refusals=sum(self.refusals.values()),
            )
        finally:
            self.metrics.stop_serving()
            if self.store is not None:
                await self.db(self.store.close)
            self._pool.shutdown(wait=False)
        return self.lifecycle.status()
