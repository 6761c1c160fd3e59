"""One term as the active link controller: from taking the lease (the ledger opened, the
book rebuilt) to losing it or being asked to stop (docs/link.md).

The loop: drain the inbox (up to ``batch_max``), run the book, commit the batch in ONE
transaction, and only after it returns queue the replies and the changed meters for
publishing. A failed commit publishes nothing (the tables send again). Heartbeats go to
every member table each ``heartbeat_s`` while the ledger's file is where it was.

A term is built whole by :func:`progressived.link.runtime.assembly.open_term` over the
ledger the lease keeper opened; it owns its broker sessions (a session that was stopped
cannot be started again) and which meter values it last published. Everything it shares
with the process (the ledger's thread and health, the lease, the counts, the refusals, the
metrics) it is given, and changes only through their methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import structlog

from progressived.ledger import Fenced, LedgerError, LedgerUnavailable
from progressived.link.core import batch as lb
from progressived.link.core import book
from progressived.link.core import params as lp
from progressived.link.core.messages import LinkedMeter, encode, to_table_topic
from progressived.link.core.ports import LinkJournal
from progressived.link.runtime import spans
from progressived.link.runtime.config import LinkConfig
from progressived.link.runtime.lease import LeaseKeeper
from progressived.link.runtime.ledger_thread import LedgerHealth, LedgerThread
from progressived.link.runtime.metrics import LinkMetrics
from progressived.link.runtime.mqtt_adapter import LinkMqtt
from progressived.link.runtime.refusals import Refusals
from progressived.link.runtime.traffic import Traffic
from progressived.runtime.systemd import Notifier
from progressived.storage.sqlite import rescue_path

log = structlog.get_logger("progressived.link")


class ShownMeters:
    """The linked meters as last published (retained), so a batch publishes only the ones
    it changed."""

    def __init__(self, params: lp.LinkParams, prefix: str, journal: LinkJournal) -> None:
        self.params, self.prefix, self.journal = params, prefix, journal
        self._shown: dict[str, tuple[int, int, object]] = {}

    def _views(self) -> dict[str, LinkedMeter]:
        return lb.meters(self.params, self.journal.book, self.journal.head)

    def changed(self) -> list[lb.Publication]:
        views = self._views()
        changed = {m: v for m, v in views.items() if self._shown.get(m) != lb.shown(v)}
        self._shown.update({m: lb.shown(v) for m, v in changed.items()})
        return lb.meter_messages(self.params, self.prefix, changed)

    def everything(self) -> list[lb.Publication]:
        """Every linked meter (each (re)connection: a broker may have lost them)."""
        meters = self._views()
        self._shown = {m: lb.shown(v) for m, v in meters.items()}
        return lb.meter_messages(self.params, self.prefix, meters)


class ActiveTerm:
    """The batches, heartbeats and lease renewals of one term (see the module)."""

    def __init__(
        self,
        *,
        config: LinkConfig,
        journal: LinkJournal,
        mqtt: LinkMqtt,
        meters: ShownMeters,
        ledger_thread: LedgerThread,
        health: LedgerHealth,
        lease: LeaseKeeper,
        traffic: Traffic,
        refusals: Refusals,
        metrics: LinkMetrics | None,
        notifier: Notifier,
        clock: Callable[[], str],
    ) -> None:
        self.config, self.params, self.prefix = config, config.params, config.mqtt.prefix
        self.journal, self.mqtt, self.meters = journal, mqtt, meters
        self.ledger_thread, self.health, self.lease = ledger_thread, health, lease
        self.leadership = lease.leadership
        self.traffic, self.refusals, self.metrics = traffic, refusals, metrics
        self.notifier, self.clock = notifier, clock

    # ------------------------------------------------------------------ the loop
    async def handle(self, items: list[lb.Incoming]) -> lb.Outcome:
        """One batch: book, ONE commit, then the replies and changed meters are queued."""
        j = self.journal
        if self.health.file_problem:  # nothing applied into a file nobody will see; tables resend
            return lb.Outcome(state=j.book)
        marks = spans.BatchMarks()
        decoded = lb.decode_all(items)
        marks.decode_done()
        outcome = lb.run_batch(self.params, j.book, j.head, items, self.prefix, decoded)
        marks.book_done()
        if not self.leadership.holds():  # the term passed unrenewed (a pause, a cut)
            self.lease.lose(f"the lease's term ({self.leadership.lease_s} s) passed unrenewed")
            return lb.Outcome(state=j.book)
        if outcome.needs_commit:
            started, term_start = time.perf_counter(), time.monotonic()
            try:
                await self.ledger_thread.run(j.commit, outcome.steps)
            except Fenced as exc:
                self.lease.lose(f"a write was refused by the fence: {exc}")
                return lb.Outcome(state=j.book)
            except LedgerUnavailable as exc:
                if self.health.failed(str(exc)):
                    log.error(
                        "link ledger unavailable: nothing applied, nothing answered", error=str(exc)
                    )
                await asyncio.sleep(self.config.ledger.retry_s)
                return lb.Outcome(state=j.book)
            marks.commit_done()
            self.leadership.extended(term_start)
            if self.health.ok():
                log.info("link ledger writable again")
            if self.metrics is not None:
                self.metrics.commit.labels(self.params.link_id).observe(
                    time.perf_counter() - started
                )
        if self.metrics is not None:
            self.metrics.batch.labels(self.params.link_id).observe(len(items))
            self.metrics.count(outcome.counts)
        senders = (lb.sender_of(self.prefix, self.params.link_id, item.topic) for item in items)
        self.traffic.batch(
            outcome.counts, [t for t in senders if t in self.params.tables], time.monotonic()
        )
        self._note_refusals(outcome)
        self.mqtt.send(self.refusals.answers(outcome.replies))
        self.mqtt.send(self.meters.changed(), everywhere=True)
        spans.log_batch(items, outcome, marks)
        return outcome

    def _note_refusals(self, outcome: lb.Outcome) -> None:
        self.refusals.note(outcome)
        if self.metrics is not None:
            for r in outcome.refusals:
                if r.seq == 0:
                    self.metrics.unreadable.labels(self.params.link_id, r.code).inc()

    def heartbeats(self) -> list[lb.Publication]:
        j, at = self.journal, self.clock()
        return [
            lb.Publication(
                to_table_topic(self.prefix, self.params.link_id, table),
                encode(book.heartbeat(self.params, j.book, table, j.head, at)),
            )
            for table in sorted(self.params.tables)
        ]

    async def process(self) -> None:
        """Batches from the inbox, each member table given its share of every batch."""
        inbox, limit = self.mqtt.inbox, self.config.batch_max
        while True:
            await inbox.wait()
            items = inbox.take(limit)
            if items:
                await self.handle(items)
            await asyncio.sleep(inbox.ready_in() if not items else 0)

    async def beat(self) -> None:
        """Heartbeats to every member table; the systemd watchdog while healthy."""
        interval = self.config.heartbeat_s
        while True:
            await self._check_ledger_file()
            # No heartbeat while the ledger file is gone: the tables close the linked
            # progressive (link-down) and keep their messages until it is back.
            if self.mqtt.connected and not self.health.file_problem:
                self.mqtt.send(self.heartbeats(), everywhere=True, urgent=True)
            # Pinged while the file is gone: a restart would close the only copy of its rows.
            if self.health.error is None or self.health.file_problem:
                self.notifier.watchdog()
            await asyncio.sleep(interval)

    async def _check_ledger_file(self) -> None:
        """Notice the link ledger's file deleted or replaced under the running controller
        (SQLite; a database has no file): stop applying and heartbeating, save the rows it
        holds beside the path (nothing is applied meanwhile: once is enough), say so."""
        problem = self.journal.file_problem() or ""
        if not self.health.file_changed(problem):
            return
        if not problem:
            log.info("link ledger file back at its path")
            self.health.ok()
            self.notifier.status(f"link {self.params.link_id} running")
            return
        where = self.config.ledger.path
        rescue = str(rescue_path(where, self.clock()))
        try:
            await self.ledger_thread.run(self.journal.save_copy, rescue)
            saved = f"its rows are saved to {rescue}"
        except LedgerError as exc:
            saved = f"its rows could not be saved ({exc})"
        words = (
            f"{problem}: nothing is applied and no heartbeat sent (the tables close the linked "
            f"progressive); {saved}: stop the controller, verify that copy (progressivectl "
            f"ledger verify --db), put it at {where}, start the controller"
        )
        log.error("link ledger file gone: nothing applied", reason=words)
        self.health.failed(words)
        self.notifier.status(words)

    # ------------------------------------------------------------------ life
    def start(self) -> list[asyncio.Task[Any]]:
        """The term's tasks: the broker sessions, the batches, the heartbeats, the lease."""
        loop = asyncio.get_running_loop()
        return [
            loop.create_task(self.mqtt.run(), name="mqtt"),
            loop.create_task(self.process(), name="process"),
            loop.create_task(self.beat(), name="heartbeat"),
            loop.create_task(self.lease.hold(self.journal), name="lease"),
        ]

    async def shutdown(self, tasks: list[asyncio.Task[Any]], *, drain: bool = True) -> None:
        """End a term: finish the batch being committed, send what is queued (briefly;
        nothing when the lease is lost), close the ledger (releasing the lease)."""
        process = next(t for t in tasks if t.get_name() == "process")
        process.cancel()  # a commit in progress finishes on the ledger thread regardless
        with contextlib.suppress(asyncio.CancelledError):
            await process
        if drain:
            await self.mqtt.drain(2.0)
        await self.mqtt.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if drain:
            await self.ledger_thread.close(self.journal)
        else:
            self.ledger_thread.abandon(self.journal)
        log.info("stopped", link=self.params.link_id)
