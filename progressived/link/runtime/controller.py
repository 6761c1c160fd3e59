"""The link controller process: the tables' messages -> the link book -> the link ledger ->
results, heartbeats and the retained linked meters (docs/link.md).

Parts: :class:`~progressived.link.runtime.mqtt_adapter.LinkMqtt` (broker session, inbox, ordered
outbox), :func:`~progressived.link.core.batch.run_batch` (the pure book over one batch), the
ledger behind the :class:`~progressived.link.core.ports.LinkJournal` port on its own thread,
metrics, the control socket. The loop: drain the inbox (up to ``batch_max``), run the book,
commit the batch in ONE transaction, and only after it returns queue the replies and the
changed meters for publishing. A failed commit publishes nothing (the tables send again).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import structlog

from progressived import __version__
from progressived.core.money import cents, display
from progressived.engine import accounts
from progressived.ledger import Fenced, LedgerError, LedgerUnavailable
from progressived.link.core import batch as lb
from progressived.link.core import book
from progressived.link.core.messages import LinkedMeter, encode, to_table_topic
from progressived.link.core.ports import LinkJournal
from progressived.link.runtime.config import LinkConfig
from progressived.link.runtime.metrics import LinkMetrics
from progressived.link.runtime.mqtt_adapter import LinkMqtt
from progressived.runtime.clock import utc_now
from progressived.runtime.control import ControlServer, Peer
from progressived.runtime.systemd import Notifier

log = structlog.get_logger("progressived.link")
T = TypeVar("T")
INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT (docs/operations.md, "Exit codes")
HEARD_WINDOW_S = 60.0  # a table is "heard" if it sent anything this recently
FENCED_EXIT = 5  # the ledger is another controller's now (docs/operations.md: exit 5)


class RateLimitedLog:
    """At most ``burst`` warnings per ``window_s``; the number held back is told next time."""

    def __init__(self, burst: int = 10, window_s: float = 60.0) -> None:
        self.burst, self.window_s = burst, window_s
        self._start = float("-inf")
        self._in_window = 0
        self.suppressed = 0
        self._since_last = 0

    def warning(self, event: str, **fields: Any) -> bool:
        now = time.monotonic()
        if now - self._start >= self.window_s:
            self._start, self._in_window = now, 0
        if self._in_window >= self.burst:
            self.suppressed += 1
            self._since_last += 1
            return False
        self._in_window += 1
        if self._since_last:
            fields["suppressed_before"], self._since_last = self._since_last, 0
        log.warning(event, **fields)
        return True


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
    ) -> None:
        self.config = config
        self.params = config.params
        self.prefix = config.mqtt.prefix
        self.version = version
        self.notifier = notifier or Notifier()
        self.clock = clock
        self._opener = opener
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="link-ledger")
        self.journal: LinkJournal | None = None
        self.mqtt = LinkMqtt(config.mqtt, self.params.link_id, on_connect=self.republish_meters)
        self.metrics: LinkMetrics | None = None
        self.metrics_port: int | None = None
        self.ledger_error: str | None = None
        self.counts: dict[str, int] = dict.fromkeys(
            ("applied", "refused", "resend", "duplicate"), 0
        )
        self.batches = 0
        self.unreadable: dict[str, int] = {}  # payloads the decoder refused (seq 0), by code
        self.heard: dict[str, float] = {}
        self.refusal_log = RateLimitedLog()
        self._shown: dict[str, tuple[int, int, object]] = {}
        self._stop = asyncio.Event()
        self._exit_status = 0
        self._interrupted = False
        self._loop_beat = time.monotonic()
        self._lease_unrenewed = False

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
        outcome = lb.run_batch(self.params, j.book, j.head, items, self.prefix)
        if outcome.needs_commit:
            started = time.perf_counter()
            try:
                await self.db(j.commit, outcome.steps)
            except Fenced as exc:
                self.fenced(exc)
                return lb.Outcome(state=j.book)
            except LedgerUnavailable as exc:
                if self.ledger_error is None:
                    log.error(
                        "link ledger unavailable: nothing applied, nothing answered", error=str(exc)
                    )
                self.ledger_error = str(exc)
                await asyncio.sleep(self.config.ledger.retry_s)
                return lb.Outcome(state=j.book)
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
        self._log_refusals(outcome)
        self.mqtt.send([*outcome.replies, *self._changed_meters()])
        return outcome

    def fenced(self, exc: Fenced) -> None:
        """Another controller holds the link's ledger now: answer nothing more, stop (exit
        status 5, docs/link.md)."""
        log.error(
            "link ledger lease lost: another controller serves the link; stopping", error=str(exc)
        )
        self.ledger_error = str(exc)
        self._exit_status = FENCED_EXIT
        self._stop.set()

    async def _keep_lease(self) -> None:
        """Renew the ledger's lease (a ledger in a database; nothing on a file). A database
        out of reach is logged once; the commits that fail meanwhile say the rest."""
        try:
            await self.db(self.ledger.renew)
        except Fenced as exc:
            self.fenced(exc)
        except LedgerUnavailable as exc:
            if not self._lease_unrenewed:
                log.warning("link ledger lease not renewed", error=str(exc))
            self._lease_unrenewed = True
        else:
            self._lease_unrenewed = False

    def _log_refusals(self, outcome: lb.Outcome) -> None:
        for r in outcome.refusals:
            if r.seq == 0:  # not a message of the protocol: no sequence to name
                self.unreadable[r.code] = self.unreadable.get(r.code, 0) + 1
                if self.metrics is not None:
                    self.metrics.unreadable.labels(self.params.link_id, r.code).inc()
            self.refusal_log.warning(
                "message refused", table=r.table, seq=r.seq, code=r.code, reason=r.reason
            )
        for a in outcome.final_refusals:
            self.refusal_log.warning(
                "message refused (sequence consumed)",
                table=a.table,
                seq=a.seq,
                code=a.result.code,
                reason=a.result.reason,
            )

    def _views(self) -> dict[str, LinkedMeter]:
        return lb.meters(self.params, self.ledger.book, self.ledger.head)

    def _changed_meters(self) -> list[lb.Outgoing]:
        views = self._views()
        changed = {m: v for m, v in views.items() if self._shown.get(m) != lb.shown(v)}
        self._shown.update({m: lb.shown(v) for m, v in changed.items()})
        return lb.meter_messages(self.params, self.prefix, changed)

    def republish_meters(self) -> None:
        """Every linked meter, retained (each (re)connection: the broker may have lost them)."""
        if self.journal is None:
            return
        views = self._views()
        self._shown = {m: lb.shown(v) for m, v in views.items()}
        self.mqtt.send(lb.meter_messages(self.params, self.prefix, views))

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
        inbox, limit = self.mqtt.inbox, self.config.batch_max
        while True:
            items = [await inbox.get()]
            while len(items) < limit and not inbox.empty():
                items.append(inbox.get_nowait())
            await self.handle(items)

    async def _beat(self) -> None:
        """Heartbeats to every member table; the systemd watchdog while healthy."""
        interval = self.config.heartbeat_s
        while True:
            self._loop_beat = time.monotonic()
            await self._keep_lease()
            if self.mqtt.connected:
                self.mqtt.send(self.heartbeats())
            if self.ledger_error is None:
                self.notifier.watchdog()
            await asyncio.sleep(interval)

    # ------------------------------------------------------------------ views
    def health(self) -> dict[str, float]:
        now = time.monotonic()
        return {
            "broker_connected": float(self.mqtt.connected),
            "ledger_ok": float(self.ledger_error is None),
            "tables_heard": float(sum(now - t <= HEARD_WINDOW_S for t in self.heard.values())),
            "inbox_depth": float(self.mqtt.inbox.qsize()),
        }

    def status(self) -> dict[str, Any]:
        j, now = self.ledger, time.monotonic()
        state = j.book
        meters: dict[str, Any] = {}
        for spec in self.params.meters:
            units = state.balances.get(accounts.meter(spec.id), 0)
            meters[spec.id] = {
                "display": display(units),
                "units": units,
                "epoch": state.epochs.get(spec.id, 0),
                "reserve_cents": cents(state.balances.get(accounts.reserve(spec.id), 0)),
                "pending_cents": cents(state.balances.get(accounts.pending(spec.id), 0)),
                "paid_cents": cents(state.balances.get(accounts.paid_attendant(spec.id), 0)),
            }
        tables = {}
        for table in sorted(self.params.tables):
            track = state.tables.get(table)
            heard = self.heard.get(table)
            tables[table] = {
                "hwm": 0 if track is None else track.hwm,
                "heard_s_ago": None if heard is None else round(now - heard, 1),
            }
        return {
            "link": self.params.link_id,
            "version": self.version,
            "policy": self.params.policy.value,
            "lseq": state.lseq,
            "meters": meters,
            "tables": tables,
            "messages": dict(self.counts),
            "unreadable": dict(self.unreadable),
            "batches": self.batches,
            "broker": {
                "connected": self.mqtt.connected,
                "state": self.mqtt.session.state,
                "error": self.mqtt.session.detail,
                "denied": dict(sorted(self.mqtt.session.denied.items())),
                "denied_total": self.mqtt.session.denied_total,
            },
            "ledger": {
                "ok": self.ledger_error is None,
                "error": self.ledger_error or "",
                "head_seq": j.head.seq,
                "head_hash": j.head.hash,
            },
        }

    async def _control(self, request: Mapping[str, Any], peer: Peer) -> dict[str, Any]:
        if request.get("action") == "status":
            return {"ok": True, "status": self.status()}
        return {"ok": False, "error": "the link controller answers `status` only"}

    # ------------------------------------------------------------------ life
    async def start(self) -> None:
        """Open the ledger (on its thread: it replays the book) and the metrics endpoint."""
        self.journal = await self.db(self._opener)
        structlog.contextvars.bind_contextvars(link=self.params.link_id)
        cfg = self.config
        if cfg.metrics.enabled:
            self.metrics = LinkMetrics(self.params, lambda: self.ledger.book, self.health)
            self.metrics_port = self.metrics.serve(cfg.metrics.address, cfg.metrics.port)
            log.info("metrics", address=cfg.metrics.address, port=self.metrics_port)

    def request_stop(self, interrupted: bool = False) -> None:
        """Stop (SIGTERM); ``interrupted``: a Ctrl-C, whose exit status is 130."""
        self._interrupted = self._interrupted or interrupted
        self._stop.set()

    def _task_ended(self, task: asyncio.Task[Any]) -> None:
        """Crash-only: a core task that ends on its own stops the controller (status 1)."""
        if task.cancelled() or self._stop.is_set():
            return
        log.error("core task ended: stopping", task=task.get_name(), error=repr(task.exception()))
        self._exit_status = 1
        self._stop.set()

    async def run(self, *, install_signals: bool = True) -> int:
        """Run until SIGTERM (status 0) or SIGINT (130). The control socket is claimed
        first and the metrics port when the ledger is open, so a second controller given
        the same socket or port refuses (:class:`~progressived.runtime.listen.ListenError`)."""
        loop = asyncio.get_running_loop()
        if install_signals:
            loop.add_signal_handler(signal.SIGTERM, self.request_stop)
            loop.add_signal_handler(signal.SIGINT, self.request_stop, True)
        control = ControlServer(
            self.config.control.socket, self.config.control.group, self._control
        )
        control.claim()
        try:
            await self.start()
        except BaseException:
            await control.stop()
            if self.journal is not None:
                with contextlib.suppress(LedgerError):
                    await self.db(self.journal.close)
            self._executor.shutdown(wait=True)
            raise
        tasks = [
            loop.create_task(self.mqtt.run(), name="mqtt"),
            loop.create_task(self._process(), name="process"),
            loop.create_task(self._beat(), name="heartbeat"),
        ]
        for task in tasks:
            task.add_done_callback(self._task_ended)
        await control.start()
        j = self.ledger
        log.info(
            "running",
            link=self.params.link_id,
            tables=len(self.params.tables),
            meters=[m.id for m in self.params.meters],
            head_seq=j.head.seq,
            broker=f"{self.config.mqtt.host}:{self.config.mqtt.port}",
        )
        self.notifier.ready(f"link {self.params.link_id} running")
        await self._stop.wait()
        self.notifier.stopping()
        await self.shutdown(tasks, control)
        if self._interrupted and self._exit_status == 0:
            return INTERRUPTED
        return self._exit_status

    async def shutdown(self, tasks: list[asyncio.Task[Any]], control: ControlServer) -> None:
        """Finish the batch being committed, send what is queued (briefly), close."""
        process = next(t for t in tasks if t.get_name() == "process")
        process.cancel()  # a commit in progress finishes on the ledger thread regardless
        with contextlib.suppress(asyncio.CancelledError):
            await process
        await self.mqtt.drain(2.0)
        await self.mqtt.stop()
        await control.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(LedgerError):
            await self.db(self.ledger.close)
        self._executor.shutdown(wait=True)
        log.info("stopped", link=self.params.link_id)
