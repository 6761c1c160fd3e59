"""The link controller process: the tables' messages -> the link book -> the link ledger ->
results, heartbeats and the retained linked meters (docs/link.md).

Parts: :class:`~progressived.link.runtime.mqtt_adapter.LinkMqtt` (broker session, inbox, ordered
outbox), :func:`~progressived.link.core.batch.run_batch` (the pure book over one batch), the
ledger behind the :class:`~progressived.link.core.ports.LinkJournal` port on its own thread,
metrics, the control socket. The loop: drain the inbox (up to ``batch_max``), run the book,
commit the batch in ONE transaction, and only after it returns queue the replies and the
changed meters for publishing. A failed commit publishes nothing (the tables send again).

On a ledger in a database the controller serves only while it holds the ledger's lease
(:mod:`progressived.link.runtime.leadership`): one that finds it held waits as a
**standby**, connected to no broker, and takes over when it lapses (the book rebuilt from
the ledger, as a restart does); an active one that loses it (a write refused by the fence,
or no renewal for ``lease_s``) drops its broker sessions at once, journals nothing more and
becomes a standby (``standby=False``: exits with status 5 instead, as before).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import structlog

from progressived import __version__
from progressived.ledger import Fenced, LedgerError, LedgerUnavailable
from progressived.link.core import batch as lb
from progressived.link.core import book
from progressived.link.core.messages import LinkedMeter, encode, to_table_topic
from progressived.link.core.ports import LinkJournal
from progressived.link.core.state import BookState
from progressived.link.runtime import spans, standby, views
from progressived.link.runtime.config import LinkConfig
from progressived.link.runtime.leadership import Leadership
from progressived.link.runtime.metrics import LinkMetrics
from progressived.link.runtime.mqtt_adapter import LinkMqtt
from progressived.link.runtime.refusals import Refusals
from progressived.runtime.clock import utc_now
from progressived.runtime.control import ControlServer, Peer
from progressived.runtime.lifecycle import Lifecycle
from progressived.runtime.systemd import Notifier
from progressived.storage.sqlite import rescue_path

log = structlog.get_logger("progressived.link")
T = TypeVar("T")


class LinkController:
    """One link: its ledger, broker session, loops, metrics and control socket."""

    def __init__(
        self,
        config: LinkConfig,
        opener: Callable[[], LinkJournal],
        *,
        version: str = __version__,
        notifier: Notifier | None = None,
        clock: Callable[[], str] = utc_now,
        standby: bool = True,
    ) -> None:
        self.config = config
        self.params = config.params
        self.prefix = config.mqtt.prefix
        self.version = version
        self.notifier = notifier or Notifier()
        self.clock = clock
        self.opener = opener
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="link-ledger")
        self.journal: LinkJournal | None = None
        self.standby = standby
        self.leadership = Leadership(config.ledger.lease_holder(), config.ledger.lease_s)
        self.mqtt = self._new_mqtt()
        self.metrics: LinkMetrics | None = None
        self.metrics_port: int | None = None
        self.ledger_error: str | None = None
        self.ledger_file = ""  # why the ledger's path no longer names its open file
        self.counts: dict[str, int] = dict.fromkeys(
            ("applied", "refused", "resend", "duplicate"), 0
        )
        self.batches = 0
        self.heard: dict[str, float] = {}
        self.refusals = Refusals(config.params.tables)
        self._shown: dict[str, tuple[int, int, object]] = {}
        self.lost = asyncio.Event()  # this term's lease is lost: stand down
        # a task ending once the lease is lost is the stand-down, not a crash (each term
        # has a new ``lost``: read it when a task ends)
        self.lifecycle = Lifecycle(log, "core task ended: stopping", quiet=self._lease_lost)
        self.loop_beat = time.monotonic()
        self.lease_unrenewed = False
        self.unreachable_logged = False

    def _new_mqtt(self) -> LinkMqtt:
        """A term's broker sessions (a session that was stopped cannot be started again)."""
        return LinkMqtt(
            self.config.mqtt,
            self.params.link_id,
            tables=self.params.tables,
            on_connect=self.republish_meters,
            gate=self.leadership.holds,
        )

    # ------------------------------------------------------------------ ledger thread
    async def db(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args))

    @property
    def ledger(self) -> LinkJournal:
        assert self.journal is not None, "start() opens the ledger"
        return self.journal

    # ------------------------------------------------------------------ the loop
    async def handle(self, items: list[lb.Incoming]) -> lb.Outcome:
        """One batch: book, ONE commit, then the replies and changed meters are queued."""
        j = self.ledger
        if self.ledger_file:  # nothing applied into a file nobody will see; tables resend
            return lb.Outcome(state=j.book)
        marks = spans.BatchMarks()
        decoded = lb.decode_all(items)
        marks.decode_done()
        outcome = lb.run_batch(self.params, j.book, j.head, items, self.prefix, decoded)
        marks.book_done()
        if not self.leadership.holds():  # the term passed unrenewed (a pause, a cut)
            self.lose(f"the lease's term ({self.leadership.lease_s} s) passed unrenewed")
            return lb.Outcome(state=j.book)
        if outcome.needs_commit:
            started, term_start = time.perf_counter(), time.monotonic()
            try:
                await self.db(j.commit, outcome.steps)
            except Fenced as exc:
                self.lose(f"a write was refused by the fence: {exc}")
                return lb.Outcome(state=j.book)
            except LedgerUnavailable as exc:
                if self.ledger_error is None:
                    log.error(
                        "link ledger unavailable: nothing applied, nothing answered", error=str(exc)
                    )
                self.ledger_error = str(exc)
                await asyncio.sleep(self.config.ledger.retry_s)
                return lb.Outcome(state=j.book)
            marks.commit_done()
            self.leadership.extended(term_start)
            if self.ledger_error is not None:
                log.info("link ledger writable again")
            self.ledger_error = None
            if self.metrics is not None:
                self.metrics.commit.labels(self.params.link_id).observe(
                    time.perf_counter() - started
                )
        self.batches += 1
        for key, n in outcome.counts.items():
            self.counts[key] = self.counts.get(key, 0) + n
        if self.metrics is not None:
            self.metrics.batch.labels(self.params.link_id).observe(len(items))
            self.metrics.count(outcome.counts)
        now = time.monotonic()
        for item in items:
            table = lb.sender_of(self.prefix, self.params.link_id, item.topic)
            if table in self.params.tables:
                self.heard[table] = now
        self._note_refusals(outcome)
        self.mqtt.send(self.refusals.answers(outcome.replies))
        self.mqtt.send(self._changed_meters(), everywhere=True)
        spans.log_batch(items, outcome, marks)
        return outcome

    def lose(self, why: str) -> None:
        """The lease is lost: stop serving at once, then stand by (or exit 5)."""
        standby.lose(self, why)

    @property
    def unreadable(self) -> dict[str, int]:
        """Payloads the decoder refused (seq 0), by code (the status's ``unreadable``)."""
        return dict(self.refusals.unreadable)

    def _note_refusals(self, outcome: lb.Outcome) -> None:
        self.refusals.note(outcome)
        if self.metrics is not None:
            for r in outcome.refusals:
                if r.seq == 0:
                    self.metrics.unreadable.labels(self.params.link_id, r.code).inc()

    def _views(self) -> dict[str, LinkedMeter]:
        return lb.meters(self.params, self.ledger.book, self.ledger.head)

    def _changed_meters(self) -> list[lb.Outgoing]:
        views = self._views()
        changed = {m: v for m, v in views.items() if self._shown.get(m) != lb.shown(v)}
        self._shown.update({m: lb.shown(v) for m, v in changed.items()})
        return lb.meter_messages(self.params, self.prefix, changed)

    def republish_meters(self) -> None:
        """Every linked meter, retained, to every broker (each (re)connection: a broker may
        have lost them)."""
        if self.journal is None:
            return
        meters = self._views()
        self._shown = {m: lb.shown(v) for m, v in meters.items()}
        self.mqtt.send(lb.meter_messages(self.params, self.prefix, meters), everywhere=True)

    def heartbeats(self) -> list[lb.Outgoing]:
        j, at = self.ledger, self.clock()
        return [
            lb.Outgoing(
                to_table_topic(self.prefix, self.params.link_id, table),
                encode(book.heartbeat(self.params, j.book, table, j.head, at)),
            )
            for table in sorted(self.params.tables)
        ]

    async def _process(self) -> None:
        """Batches from the inbox, each member table given its share of every batch."""
        inbox, limit = self.mqtt.inbox, self.config.batch_max
        while True:
            await inbox.wait()
            items = inbox.take(limit)
            if items:
                await self.handle(items)
            await asyncio.sleep(inbox.ready_in() if not items else 0)

    async def _beat(self) -> None:
        """Heartbeats to every member table; the systemd watchdog while healthy."""
        interval = self.config.heartbeat_s
        while True:
            self.loop_beat = time.monotonic()
            await self._check_ledger_file()
            # No heartbeat while the ledger file is gone: the tables close the linked
            # progressive (link-down) and keep their messages until it is back.
            if self.mqtt.connected and not self.ledger_file:
                self.mqtt.send(self.heartbeats(), everywhere=True, urgent=True)
            # Pinged while the file is gone: a restart would close the only copy of its rows.
            if self.ledger_error is None or self.ledger_file:
                self.notifier.watchdog()
            await asyncio.sleep(interval)

    async def _check_ledger_file(self) -> None:
        """Notice the link ledger's file deleted or replaced under the running controller
        (SQLite; a database has no file): stop applying and heartbeating, save the rows it
        holds beside the path (nothing is applied meanwhile: once is enough), say so."""
        if self.journal is None:
            return
        problem = self.journal.file_problem() or ""
        if problem == self.ledger_file:
            return
        self.ledger_file = problem
        if not problem:
            log.info("link ledger file back at its path")
            self.ledger_error = None
            self.notifier.status(f"link {self.params.link_id} running")
            return
        where = self.config.ledger.path
        rescue = str(rescue_path(where, self.clock()))
        try:
            await self.db(self.journal.save_copy, rescue)
            saved = f"its rows are saved to {rescue}"
        except LedgerError as exc:
            saved = f"its rows could not be saved ({exc})"
        words = (
            f"{problem}: nothing is applied and no heartbeat sent (the tables close the linked "
            f"progressive); {saved}: stop the controller, verify that copy (progressivectl "
            f"ledger verify --db), put it at {where}, start the controller"
        )
        log.error("link ledger file gone: nothing applied", reason=words)
        self.ledger_error = words
        self.notifier.status(words)

    # ------------------------------------------------------------------ views
    def health(self) -> dict[str, float]:
        return views.health(self)

    def status(self) -> dict[str, Any]:
        return views.status(self)

    def fairness(self) -> dict[str, Any]:
        return views.fairness(self)

    async def _control(self, request: Mapping[str, Any], peer: Peer) -> dict[str, Any]:
        if request.get("action") == "status":
            return {"ok": True, "status": self.status()}
        return {"ok": False, "error": "the link controller answers `status` only"}

    # ------------------------------------------------------------------ life
    def _book(self) -> BookState | None:
        return None if self.journal is None else self.journal.book

    async def start(self) -> None:
        """Open the ledger (on its thread: it replays the book) -- or, finding its lease
        held, stand by -- and the metrics endpoint. Any other fault of the ledger raises."""
        await standby.take_lease(self, first=True)
        structlog.contextvars.bind_contextvars(link=self.params.link_id)
        cfg = self.config
        if cfg.metrics.enabled:
            self.metrics = LinkMetrics(
                self.params, self._book, self.health, self.leadership, self.fairness
            )
            self.metrics_port = self.metrics.serve(cfg.metrics.address, cfg.metrics.port)
            log.info("metrics", address=cfg.metrics.address, port=self.metrics_port)

    def _lease_lost(self) -> bool:
        return self.lost.is_set()

    @property
    def stop_requested(self) -> asyncio.Event:
        """Set by a signal, :meth:`request_stop`, a fenced stop or a core task ending."""
        return self.lifecycle.stop

    def request_stop(self, interrupted: bool = False) -> None:
        """Stop (SIGTERM); ``interrupted``: a Ctrl-C, whose exit status is 130."""
        self.lifecycle.request_stop(interrupted)

    async def run(self, *, install_signals: bool = True) -> int:
        """Run until SIGTERM (status 0) or SIGINT (130). The control socket is claimed
        first and the metrics port when the ledger is open (or the lease found held), so a
        second controller given the same socket or port refuses
        (:class:`~progressived.runtime.listen.ListenError`)."""
        loop = asyncio.get_running_loop()
        if install_signals:
            self.lifecycle.install_signals(loop)
        control = ControlServer(
            self.config.control.socket, self.config.control.group, self._control
        )
        control.claim()
        try:
            await self.start()
            await control.start()
            role = "running" if self.journal is not None else "standby"
            self.notifier.ready(f"link {self.params.link_id} {role}")
            while not self.stop_requested.is_set():
                if not await standby.stand_by(self):
                    break
                await self._serve()
        finally:
            self.notifier.stopping()
            await control.stop()
            if self.journal is not None:
                with contextlib.suppress(LedgerError):
                    await self.db(self.journal.close)
                self.journal = None
            self._executor.shutdown(wait=True)
        return self.lifecycle.status()

    async def _serve(self) -> None:
        """One term as the active controller: until asked to stop or the lease is lost."""
        loop = asyncio.get_running_loop()
        self.mqtt = self._new_mqtt()
        tasks = [
            loop.create_task(self.mqtt.run(), name="mqtt"),
            loop.create_task(self._process(), name="process"),
            loop.create_task(self._beat(), name="heartbeat"),
            loop.create_task(standby.hold_lease(self), name="lease"),
        ]
        self.lifecycle.watch(*tasks)
        j = self.ledger
        log.info(
            "running",
            link=self.params.link_id,
            tables=len(self.params.tables),
            meters=[m.id for m in self.params.meters],
            head_seq=j.head.seq,
            brokers=[s.options.url for s in self.mqtt.sessions],
        )
        stop = loop.create_task(self.stop_requested.wait())
        lost = loop.create_task(self.lost.wait())
        await asyncio.wait({stop, lost}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        lost.cancel()
        standing_down = self.lost.is_set() and self.standby and not self.stop_requested.is_set()
        await self.shutdown(tasks, drain=not self.lost.is_set())
        if standing_down:
            self.heard.clear()
            self.ledger_error = None  # a standby's ledger is the database's reachability
            log.info("standby: this controller no longer serves the link")

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
        if self.journal is not None and drain:
            with contextlib.suppress(LedgerError):
                await self.db(self.journal.close)
        elif self.journal is not None:
            self._abandon_ledger_thread(self.journal)
        self.journal = None
        log.info("stopped", link=self.params.link_id)

    def _abandon_ledger_thread(self, journal: LinkJournal) -> None:
        """The lease is lost: stand by on a fresh ledger thread. The old one may be stuck in
        a commit to a primary that froze (a stopped server never answers, and its kernel
        keeps the connection open), so nothing waits for it; it closes the old ledger
        whenever that call returns (the close's release matches only this term's token)."""
        old = self._executor
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="link-ledger")
        old.submit(_close_quietly, journal)
        old.shutdown(wait=False)


def _close_quietly(journal: LinkJournal) -> None:
    with contextlib.suppress(LedgerError):
        journal.close()
