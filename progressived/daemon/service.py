"""The daemon, composed: board -> keypad -> journal (engine, ledger, outbox) -> MQTT signs.

Each part lives in :mod:`progressived.daemon` and only looks downward; this module builds
them, wires their callbacks, and runs the start, the core tasks and the stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import structlog

from progressived import __version__
from progressived.board.driver import BoardDriver
from progressived.config.daemon import DaemonConfig
from progressived.config.drivers import load_driver_factory
from progressived.daemon.board_input import BOARD_OFFLINE, BoardInput
from progressived.daemon.desk import DaemonDesk
from progressived.daemon.health import Health
from progressived.daemon.journal import Journal
from progressived.daemon.link import LinkClient
from progressived.daemon.metrics import HitCounts, TableMetrics
from progressived.daemon.operator import OperatorDesk
from progressived.daemon.outbox import LedgerOutbox
from progressived.daemon.outputs import Outputs, log_task_error
from progressived.daemon.selfcheck import run_selfcheck
from progressived.daemon.upkeep import MetricsView, housekeeping, watchdog
from progressived.engine import Command, SetClosed, TableState
from progressived.engine.meterbook.linked_port import LINKED_PORT
from progressived.ledger import Ledger, LedgerError, reports
from progressived.mqtt.payloads import Topics
from progressived.mqtt.publisher import SignPublisher
from progressived.mqtt.session import MqttSession
from progressived.mqtt.session_log import LoggedSession
from progressived.runtime.clock import utc_now
from progressived.runtime.control import ControlServer, Peer
from progressived.runtime.systemd import Notifier

log = structlog.get_logger("progressived")

SELF_CHECK_FAILED = "self-check failed"
INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT (docs/operations.md, "Exit codes")
HEAD_READ_TIMEOUT_S = 2.0  # the MQTT status waits this long for the ledger's head
__all__ = ["BOARD_OFFLINE", "SELF_CHECK_FAILED", "Controller", "run_daemon"]

P = ParamSpec("P")
T = TypeVar("T")


class Controller:
    """One table's daemon: the parts, built and run together."""

    def __init__(
        self,
        config: DaemonConfig,
        *,
        driver: BoardDriver | None = None,
        clock: Callable[[], str] = utc_now,
        version: str = __version__,
        notifier: Notifier | None = None,
    ) -> None:
        self.version = version
        self.notifier = notifier or Notifier()
        self.health = Health()
        self.listeners: list[Callable[[str, Mapping[str, Any]], None]] = []
        topics = Topics(config.mqtt.prefix, config.params.table_id)
        self.journal = Journal(config, topics, self.health, clock, self._notify)
        if driver is None:
            driver = load_driver_factory(config.driver).create(config.board)
        self.driver = driver
        # ONE broker session for the table (client id = user name = table id, docs/mqtt.md):
        # the sign publisher and the link client share it, and the health reads it.
        table_id = config.params.table_id
        self.session = MqttSession(
            config.mqtt.broker_options(f"progressived-{table_id}"), observers=[LoggedSession()]
        )
        self.health.broker = self.session
        self.publisher = SignPublisher(
            self.session,
            topics,
            LedgerOutbox(lambda: self.journal.ledger, self.journal.db),
            meter_max_rate_hz=config.mqtt.meter_max_rate_hz,
            version=version,
            clock=clock,
            hooks=_PublisherHooks(self),
            head=self._ledger_head,
        )
        self.outputs = Outputs(self.journal, self.publisher, driver, self.health)
        self.board_input = BoardInput(self.journal, self.outputs, driver, self.health)
        self.journal.changed = self.outputs.redraw
        self.journal.wake = self.publisher.wake
        self.link: LinkClient | None = None
        if config.link is not None:  # a table with linked meters (docs/link.md)
            self.link = LinkClient(self.journal, config, config.link, self.session)
            self.journal.meter_port = LINKED_PORT
            self.journal.link_outbox = self.link.outbox
            self.journal.link_wake = self.link.wake
            self.link.changed = self.outputs.redraw
        self.metrics_port: int | None = None
        self._stop = asyncio.Event()
        self._control: ControlServer | None = None
        self._exit_status = 0
        self._interrupted = False

    # ------------------------------------------------------------- what tests look at
    @property
    def config(self) -> DaemonConfig:
        return self.journal.config

    @property
    def ledger(self) -> Ledger:
        return self.journal.ledger

    @property
    def state(self) -> TableState:
        return self.journal.state

    async def db(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.journal.db(fn, *args, **kwargs)

    async def apply(self, command: Command, *, idempotency_key: str | None = None) -> bool:
        return await self.journal.apply(command, idempotency_key=idempotency_key)

    async def _ledger_head(self) -> tuple[int, str] | None:
        """The ledger's head for the MQTT status, read on the ledger thread (so the seq and
        hash are one commit's); None before the ledger is open, or if the ledger thread is
        busy for longer than a status can wait (the status then goes out without it)."""
        j = self.journal
        ledger = getattr(j, "ledger", None)
        if ledger is None:
            return None
        try:
            async with asyncio.timeout(HEAD_READ_TIMEOUT_S):
                return await j.db(lambda: (ledger.head_seq, ledger.head_hash))
        except TimeoutError:
            return None

    def _notify(self, what: str, detail: Mapping[str, Any]) -> None:
        for listener in self.listeners:
            listener(what, detail)

    # ------------------------------------------------------------- life
    async def start(self) -> None:
        """Open the ledger (recovering the round in progress) and journal the start."""
        j, cfg = self.journal, self.journal.config
        await j.open(self.version)
        if self.link is not None:
            await self.link.load()
        structlog.contextvars.bind_contextvars(table=j.params.table_id, round=j.state.round)
        if cfg.metrics.enabled:
            link = self.link.status if self.link is not None else None
            view = MetricsView(j, self.health, self.driver, self.version, link)
            j.metrics = TableMetrics(view)
            self.metrics_port = j.metrics.serve(cfg.metrics.address, cfg.metrics.port)
            log.info("metrics", address=cfg.metrics.address, port=self.metrics_port)
        await j.record(
            "daemon_started",
            {"version": self.version, "config_digest": cfg.digest, "head_seq": j.ledger.head_seq},
        )
        await self.self_check()
        # Closed until the board says hello; a round in progress keeps its state.
        await j.apply(SetClosed(reason=BOARD_OFFLINE, closed=True, at=j.clock(), actor="system"))
        self.outputs.redraw()

    async def self_check(self) -> bool:
        """Software, configuration and ledger chain head; journaled and published.

        A failure keeps the progressive closed (until a start whose check passes).
        """
        j, cfg = self.journal, self.journal.config
        paytable = Path(j.params.paytable.source)
        result = await asyncio.to_thread(
            run_selfcheck,
            ledger_path=cfg.ledger.path,
            config_path=cfg.source,
            paytable_path=paytable if paytable.is_file() else None,
            expected_software=cfg.selfcheck.software_sha256,
        )
        await j.record(
            "self_check", {"ok": result.ok, "problems": result.problems, **result.detail}
        )
        now = j.clock()
        if result.ok:
            log.info("self-check passed", **result.detail)
        else:
            log.error("self-check failed: the progressive stays closed", problems=result.problems)
        closed = not result.ok
        await j.apply(SetClosed(reason=SELF_CHECK_FAILED, closed=closed, at=now, actor="system"))
        return result.ok

    def _task_ended(self, task: asyncio.Task[Any]) -> None:
        """Crash-only: a core task that ends on its own stops the daemon with status 1.

        systemd (Restart=always) then starts it again from the ledger, which is the state
        it would have had anyway; running on without the board, the broker or the input
        loop would only hide the fault.
        """
        if task.cancelled() or self._stop.is_set():
            return
        exc = task.exception()
        log.error("core task ended: stopping for a restart", task=task.get_name(), error=repr(exc))
        self._exit_status = 1
        self._stop.set()

    def request_stop(self, interrupted: bool = False) -> None:
        """Stop (SIGTERM); ``interrupted``: a Ctrl-C, whose exit status is 130."""
        self._interrupted = self._interrupted or interrupted
        self._stop.set()

    async def run(self, *, install_signals: bool = True) -> int:
        """Run until SIGTERM/SIGINT (or :meth:`request_stop`); returns the exit status.

        The control socket is claimed before the ledger is opened and the metrics port
        right after, so a second daemon given the same socket or port refuses
        (:class:`~progressived.runtime.listen.ListenError`) before it journals its start. SIGTERM
        is a requested stop (status 0), SIGINT an interruption (status 130).
        """
        loop = asyncio.get_running_loop()
        if install_signals:
            loop.add_signal_handler(signal.SIGTERM, self.request_stop)
            loop.add_signal_handler(signal.SIGINT, self.request_stop, True)
        cfg = self.journal.config
        control = ControlServer(cfg.control.socket, cfg.control.group, _not_yet)
        control.claim()
        self._control = control
        try:
            await self.start()
        except BaseException:
            await control.stop()
            await self._close_ledger()
            raise
        j = self.journal
        tasks = [
            loop.create_task(self.session.run(), name="mqtt"),
            loop.create_task(self.driver.run(), name="board"),
            loop.create_task(self.board_input.run(), name="input"),
            loop.create_task(housekeeping(j, self.health), name="housekeeping"),
            # Always: it logs each change of health; it pings systemd only under a watchdog.
            loop.create_task(watchdog(j, self.health, self.notifier), name="watchdog"),
        ]
        if self.link is not None:
            tasks.append(loop.create_task(self.link.run(), name="link"))
        for task in tasks:
            task.add_done_callback(self._task_ended)
        log.info(
            "running",
            table=j.params.table_id,
            paytable=j.params.paytable.id,
            ledger=str(cfg.ledger.path),
            broker=f"{cfg.mqtt.host}:{cfg.mqtt.port}",
        )
        port = DaemonDesk(
            j,
            self.board_input,
            self.driver,
            self.health,
            version=self.version,
            metrics_port=lambda: self.metrics_port,
            link_status=self.link.status if self.link is not None else lambda: None,
        )
        desk = OperatorDesk(port)
        control.handler, control.on_refused = desk.handle, desk.refused
        await control.start()
        self._notify("ready", {})
        loop.create_task(self._seed_hits(), name="seed-hits").add_done_callback(log_task_error)
        self.notifier.ready(f"table {j.params.table_id} running")
        await self._stop.wait()
        self.notifier.stopping()
        await self.shutdown(tasks)
        if self._interrupted and self._exit_status == 0:
            return INTERRUPTED
        return self._exit_status

    async def _close_ledger(self) -> None:
        """After a start that failed part-way: close the ledger if it was opened."""
        j = self.journal
        if getattr(j, "ledger", None) is not None:
            with contextlib.suppress(LedgerError):
                await j.db(j.ledger.close)
        j.close_thread()

    async def shutdown(self, tasks: Sequence[asyncio.Task[Any]]) -> None:
        """Finish the open transaction, journal the stop, publish offline, close."""
        j = self.journal
        async with j.lock:  # waits for a command being journaled
            for task in tasks:
                if task.get_name() in ("input", "housekeeping", "watchdog", "link"):
                    task.cancel()
            with contextlib.suppress(LedgerError):
                await j.db(
                    j.ledger.record,
                    "daemon_stopped",
                    {"version": self.version},
                    at=j.clock(),
                    actor="system",
                )
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._drain_outbox(), timeout=2.0)
        if self._control is not None:
            await self._control.stop()
        await self.publisher.stop()
        await self.driver.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
        await j.db(j.ledger.close)
        j.close_thread()
        log.info("stopped", table=j.params.table_id)

    async def _seed_hits(self) -> None:
        """Hits and wins per hand from the ledger (a read-only scan, off the event loop).

        Commands wait meanwhile (the board is still saying hello at start), so no event
        is counted twice or missed.
        """
        j = self.journal
        async with j.lock:
            report = await asyncio.to_thread(reports.meters, j.config.ledger.path)
            fresh = HitCounts()
            fresh.seed(report)
            with j.hits.lock:
                j.hits.progressive_in = fresh.progressive_in
                j.hits.hits, j.hits.wins = fresh.hits, fresh.wins

    async def _drain_outbox(self) -> None:
        while self.publisher.connected and not await self.journal.outbox_empty():
            self.publisher.wake()
            await asyncio.sleep(0.05)


async def _not_yet(request: Mapping[str, Any], peer: Peer) -> dict[str, Any]:
    """The control socket's handler until the operator desk is built (never called: the
    socket answers only once :meth:`ControlServer.start` runs, after the desk exists)."""
    return {"ok": False, "error": "the daemon is starting"}


class _PublisherHooks:
    """The publisher's hooks, forwarded to the outputs (built after the publisher)."""

    def __init__(self, controller: Controller) -> None:
        self._controller = controller

    def published(self, topic: str, seq: int, first_seen: float | None) -> None:
        self._controller.outputs.published(topic, seq, first_seen)


async def run_daemon(config: DaemonConfig) -> int:
    controller = Controller(config)
    return await controller.run()
