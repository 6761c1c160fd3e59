"""The daemon, composed: board -> keypad -> journal (engine, ledger, outbox) -> MQTT signs.

Each part lives in :mod:`progressived.daemon` and only looks downward; this module builds
them, wires their callbacks, and runs the start, the core tasks and the stop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import structlog

from progressived import __version__
from progressived.board.driver import BoardDriver
from progressived.config.daemon import DaemonConfig
from progressived.config.drivers import load_driver_factory
from progressived.daemon.assembly import OpenTable, Surroundings, assemble
from progressived.daemon.board_input import BOARD_OFFLINE, BoardInput
from progressived.daemon.desk import DaemonDesk
from progressived.daemon.health import BrokerDownSince, Health, assess, unit_status
from progressived.daemon.journal import Journal
from progressived.daemon.ledger_executor import LedgerExecutor
from progressived.daemon.operator import OperatorDesk
from progressived.daemon.outputs import log_task_error
from progressived.daemon.port import Submitted
from progressived.daemon.selfcheck import run_selfcheck
from progressived.daemon.upkeep import housekeeping, watchdog
from progressived.engine import Command, SetClosed, TableState
from progressived.ledger import Ledger, LedgerError, reports
from progressived.mqtt.session import MqttSession
from progressived.mqtt.session_log import LoggedSession
from progressived.runtime.clock import JournalClock, utc_now
from progressived.runtime.control import ControlServer, Peer
from progressived.runtime.lifecycle import Lifecycle
from progressived.runtime.systemd import Notifier

log = structlog.get_logger("progressived")

SELF_CHECK_FAILED = "self-check failed"
__all__ = ["BOARD_OFFLINE", "SELF_CHECK_FAILED", "Controller", "run_daemon"]

P = ParamSpec("P")
T = TypeVar("T")


class Controller:
    """One table's daemon: the parts, built and run together.

    What does not need the ledger (the ledger thread, the broker session, the board driver,
    health) is built here; :meth:`start` opens the ledger and builds the rest over it
    (:func:`~progressived.daemon.assembly.assemble`), so no part ever sees a ledger that is
    not open.
    """

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
        self.clock = clock
        self.executor = LedgerExecutor(JournalClock(clock))
        if driver is None:
            driver = load_driver_factory(config.driver).create(config.board)
        self.driver = driver
        # ONE broker session for the table (client id = user name = table id, docs/mqtt.md):
        # the sign publisher and the link client share it, and the health reads it.
        table_id = config.params.table_id
        self.session = MqttSession(
            config.mqtt.broker_options(f"progressived-{table_id}"),
            observers=[LoggedSession(), BrokerDownSince(self.health, clock)],
        )
        self.health.broker = self.session
        self._config = config
        self._table: OpenTable | None = None
        self.metrics_port: int | None = None
        self.lifecycle = Lifecycle(log, "core task ended: stopping for a restart")
        self._control: ControlServer | None = None

    # ------------------------------------------------------------- what tests look at
    @property
    def table(self) -> OpenTable:
        """The parts over the open ledger; only after :meth:`start`."""
        if self._table is None:
            raise RuntimeError("the table's ledger is not open: start() first")
        return self._table

    @property
    def journal(self) -> Journal:
        return self.table.journal

    @property
    def board_input(self) -> BoardInput:
        return self.table.board_input

    @property
    def config(self) -> DaemonConfig:
        return self._table.current.config if self._table is not None else self._config

    @property
    def ledger(self) -> Ledger:
        return self.table.ledger

    @property
    def state(self) -> TableState:
        """The table's state (the initial one until the ledger is open, for a watcher)."""
        return self._table.current.state if self._table is not None else TableState()

    async def db(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.executor.run(fn, *args, **kwargs)

    async def submit(self, command: Command, *, idempotency_key: str | None = None) -> Submitted:
        return await self.table.journal.submit(command, idempotency_key=idempotency_key)

    def _notify(self, what: str, detail: Mapping[str, Any]) -> None:
        for listener in self.listeners:
            listener(what, detail)

    # ------------------------------------------------------------- life
    async def start(self) -> None:
        """Open the ledger (recovering the round in progress), build the parts over it and
        journal the start."""
        cfg = self._config
        # create=False: a missing ledger is never an empty one (`progressived init` makes it).
        ledger = await self.executor.run(
            Ledger.open,
            cfg.ledger.path,
            cfg.params,
            at=self.clock(),
            software=self.version,
            create=False,
        )
        around = Surroundings(
            config=cfg,
            executor=self.executor,
            session=self.session,
            driver=self.driver,
            health=self.health,
            clock=self.clock,
            notify=self._notify,
            version=self.version,
        )
        try:
            table = assemble(ledger, around)
        except BaseException:
            await self.executor.run(ledger.close)
            raise
        self._table = table
        j = table.journal
        if table.link is not None:
            await table.link.load()
        structlog.contextvars.bind_contextvars(table=cfg.params.table_id, round=j.state.round)
        if table.metrics is not None:
            self.metrics_port = table.metrics.serve(cfg.metrics.address, cfg.metrics.port)
            log.info("metrics", address=cfg.metrics.address, port=self.metrics_port)
        await j.record(
            "daemon_started",
            {"version": self.version, "config_digest": cfg.digest, "head_seq": ledger.head_seq},
        )
        await self.self_check()
        # Closed until the board says hello; a round in progress keeps its state.
        await j.submit(SetClosed(reason=BOARD_OFFLINE, closed=True, at=j.clock(), actor="system"))
        table.outputs.redraw()

    async def self_check(self) -> bool:
        """Software, configuration and ledger chain head; journaled and published.

        A failure keeps the progressive closed (until a start whose check passes).
        """
        j, cfg = self.journal, self.config
        paytable = Path(cfg.params.paytable.source)
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
        await j.submit(SetClosed(reason=SELF_CHECK_FAILED, closed=closed, at=now, actor="system"))
        return result.ok

    def request_stop(self, interrupted: bool = False) -> None:
        """Stop (SIGTERM); ``interrupted``: a Ctrl-C, whose exit status is 130."""
        self.lifecycle.request_stop(interrupted)

    async def run(self, *, install_signals: bool = True) -> int:
        """Run until SIGTERM/SIGINT (or :meth:`request_stop`); returns the exit status.

        The control socket is claimed before the ledger is opened and the metrics port
        right after, so a second daemon given the same socket or port refuses
        (:class:`~progressived.runtime.listen.ListenError`) before it journals its start. SIGTERM
        is a requested stop (status 0), SIGINT an interruption (status 130).
        """
        loop = asyncio.get_running_loop()
        if install_signals:
            self.lifecycle.install_signals(loop)
        cfg = self.config
        control = ControlServer(cfg.control.socket, cfg.control.group, _not_yet)
        control.claim()
        self._control = control
        try:
            await self.start()
        except BaseException:
            await control.stop()
            await self._close_ledger()
            raise
        table = self.table
        ending, cancelled = self._tasks(loop, table)
        self.lifecycle.watch(*ending, *cancelled)  # crash-only: systemd restarts from the ledger
        log.info(
            "running",
            table=cfg.params.table_id,
            paytable=cfg.params.paytable.id,
            ledger=str(cfg.ledger.path),
            brokers=[f"{h}:{p}" for h, p in cfg.mqtt.endpoints()],
        )
        port = DaemonDesk(
            table.journal,
            table.board_input,
            self.driver,
            self.health,
            version=self.version,
            metrics_port=lambda: self.metrics_port,
            link_status=table.link.status if table.link is not None else lambda: None,
            archive_status=table.archive.status if table.archive is not None else lambda: None,
            printing=table.printing,
        )
        desk = OperatorDesk(port)
        control.handler, control.on_refused = desk.handle, desk.refused
        await control.start()
        self._notify("ready", {})
        loop.create_task(self._seed_hits(), name="seed-hits").add_done_callback(log_task_error)
        # Degraded already (a broker down at the start): the status line says so from READY.
        ok, why = assess(self.health, table.current.config.watchdog, table.current.state.closed)
        self.notifier.ready(unit_status(ok, why, healthy=f"table {cfg.params.table_id} running"))
        await self.lifecycle.stop.wait()
        self.notifier.stopping()
        await self.shutdown(ending, cancelled)
        return self.lifecycle.status()

    def _tasks(
        self, loop: asyncio.AbstractEventLoop, table: OpenTable
    ) -> tuple[list[asyncio.Task[Any]], list[asyncio.Task[Any]]]:
        """The daemon's tasks. The broker session and the board end when the publisher and
        the driver stop; the others are cancelled at the stop (under the lock: never in a
        write)."""
        ending = [
            loop.create_task(self.session.run(), name="mqtt"),
            loop.create_task(self.driver.run(), name="board"),
        ]
        cancelled = [
            loop.create_task(table.board_input.run(), name="input"),
            loop.create_task(housekeeping(table.writer, self.health), name="housekeeping"),
            # Always: it logs each change of health; it pings systemd only under a watchdog.
            loop.create_task(watchdog(table.current, self.health, self.notifier), name="watchdog"),
        ]
        if table.link is not None:
            cancelled.append(loop.create_task(table.link.run(), name="link"))
        if table.archive is not None:
            cancelled.append(loop.create_task(table.archive.run(), name="archive"))
        if table.printing is not None:  # the slip printer's queue (docs/slips.md)
            cancelled.append(loop.create_task(table.printing.run(), name="slip-printer"))
        return ending, cancelled

    async def _close_ledger(self) -> None:
        """After a start that failed part-way: close the ledger if it was opened."""
        if self._table is not None:
            with contextlib.suppress(LedgerError):
                await self.executor.run(self._table.ledger.close)
        self.executor.close()

    async def shutdown(
        self, ending: Sequence[asyncio.Task[Any]], cancelled: Sequence[asyncio.Task[Any]]
    ) -> None:
        """Finish the open transaction, journal the stop, publish offline, close.

        ``cancelled`` are cancelled once no command is being journaled; ``ending`` end as
        the publisher and the driver stop.
        """
        table = self.table
        ledger = table.ledger
        async with table.writer.lock:  # waits for a command being journaled
            for task in cancelled:
                task.cancel()
            with contextlib.suppress(LedgerError):
                await self.executor.run(
                    ledger.record,
                    "daemon_stopped",
                    {"version": self.version},
                    at=self.clock(),
                    actor="system",
                )
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._drain_outbox(), timeout=2.0)
        if self._control is not None:
            await self._control.stop()
        await table.publisher.stop()
        await self.driver.stop()
        await asyncio.gather(*ending, *cancelled, return_exceptions=True)
        if table.archive is not None:
            table.archive.close()
        await self.executor.run(ledger.close)
        self.executor.close()
        log.info("stopped", table=self.config.params.table_id)

    async def _seed_hits(self) -> None:
        """Hits and wins per hand from the ledger (a read-only scan, off the event loop).

        Commands wait meanwhile (the board is still saying hello at start), so no event
        is counted twice or missed.
        """
        table = self.table
        async with table.writer.lock:
            report = await asyncio.to_thread(reports.meters, self.config.ledger.path)
            table.hits.reset(report)

    async def _drain_outbox(self) -> None:
        table = self.table
        while table.publisher.connected and not await table.writer.outbox_empty():
            table.publisher.wake()
            await asyncio.sleep(0.05)


async def _not_yet(request: Mapping[str, Any], peer: Peer) -> dict[str, Any]:
    """The control socket's handler until the operator desk is built (never called: the
    socket answers only once :meth:`ControlServer.start` runs, after the desk exists)."""
    return {"ok": False, "error": "the daemon is starting"}


async def run_daemon(config: DaemonConfig) -> int:
    controller = Controller(config)
    return await controller.run()
