"""The daemon: wires board -> keypad -> engine -> ledger -> outbox -> MQTT signs.

One asyncio task applies commands one at a time (the ledger has one writer); ledger calls
run on a single dedicated thread so the event loop keeps serving heartbeats while SQLite
waits for fsync. A command is decided by the pure engine, journaled (events, postings,
balances and their outbox messages in one transaction) and only then takes effect: a
failure to journal leaves the state as it was and closes the progressive.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import structlog

from progressived import __version__
from progressived.board import (
    BoardDriver,
    BoardEvent,
    BoardOffline,
    BoardOnline,
    KeyPressed,
    SensorsReported,
    SupervisorKey,
    load_driver_factory,
)
from progressived.clock import JournalClock, utc_now
from progressived.control import ControlServer
from progressived.engine import (
    Command,
    Lock,
    Sensors,
    SetClosed,
    TableState,
    decide,
)
from progressived.engine.events import Event
from progressived.keypad import KeypadInterpreter, OutcomeKind
from progressived.ledger import (
    JournalRow,
    Ledger,
    LedgerError,
    LedgerUnavailable,
    OutboxMessage,
    reports,
)
from progressived.lights import Light, lights
from progressived.metrics import HitCounts, TableMetrics
from progressived.mqtt.payloads import (
    Topics,
    dumps,
    event_payload,
    meter_payload,
    meter_state,
    meter_units,
    system_payload,
)
from progressived.mqtt.publisher import PendingMessage, SignPublisher
from progressived.operator import OperatorDesk
from progressived.selfcheck import run_selfcheck
from progressived.settings import DaemonConfig
from progressived.systemd import Notifier

log = structlog.get_logger("progressived")

BOARD_OFFLINE = "board offline"
SELF_CHECK_FAILED = "self-check failed"

P = ParamSpec("P")
T = TypeVar("T")


@dataclass
class Health:
    """What the watchdog and ``status`` look at."""

    board_online: bool = False
    broker_connected: bool = False
    ledger_ok: bool = True
    loop_beat: float = field(default_factory=time.monotonic)
    board_offline_since: float = field(default_factory=time.monotonic)
    last_error: str = ""


class _LedgerOutbox:
    """The publisher's view of the ledger's outbox, on the ledger thread."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    async def pending(self, limit: int) -> Sequence[PendingMessage]:
        ledger = self.controller.ledger
        rows = await self.controller.db(ledger.outbox_pending, limit)
        return [PendingMessage(r.id, r.topic, r.payload, r.qos, r.retain, r.seq) for r in rows]

    async def ack(self, ids: Sequence[int]) -> None:
        await self.controller.db(self.controller.ledger.outbox_ack, ids)


class Controller:
    """One table's controller."""

    def __init__(
        self,
        config: DaemonConfig,
        *,
        driver: BoardDriver | None = None,
        clock: Callable[[], str] = utc_now,
        version: str = __version__,
        notifier: Notifier | None = None,
    ) -> None:
        self.config = config
        self.notifier = notifier or Notifier()
        self.params = config.params
        self.clock = clock
        self.journal_clock = JournalClock(clock)
        self.version = version
        self.health = Health()
        self.topics = Topics(config.mqtt.prefix, self.params.table_id)
        self.keypad = KeypadInterpreter(
            config.keypad, self.params.paytable.hand_ids, self.params.seats
        )
        if driver is None:
            driver = load_driver_factory(config.driver).create(config.board)
        self.driver = driver
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")
        self.lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._last_write = time.monotonic()
        self._lights: dict[int, Light] | None = None
        self.ledger: Ledger
        self.state: TableState = TableState()
        self.publisher = SignPublisher(
            config.mqtt,
            self.topics,
            _LedgerOutbox(self),
            version=version,
            clock=clock,
            hooks=self,
        )
        self.listeners: list[Callable[[str, Mapping[str, Any]], None]] = []
        self.metrics: TableMetrics | None = None
        self.metrics_port: int | None = None
        self.hits = HitCounts()
        self._key_started: dict[int, float] = {}
        self._control: ControlServer | None = None
        self._exit_status = 0

    # ------------------------------------------------------------- plumbing
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

    def broker_up(self, up: bool) -> None:
        self.health.broker_connected = up

    def published(self, topic: str, seq: int, first_seen: float | None) -> None:
        started = self._key_started.pop(seq, None)
        if started is not None and self.metrics is not None:
            self.metrics.key_to_publish.labels(self.params.table_id).observe(
                time.perf_counter() - started
            )
        for listener in self.listeners:
            listener("published", {"topic": topic, "seq": seq, "first_seen": first_seen})

    def _notify(self, what: str, detail: Mapping[str, Any]) -> None:
        for listener in self.listeners:
            listener(what, detail)

    # ------------------------------------------------------------- outbox builders
    def _event_outbox(
        self, events: Sequence[Event]
    ) -> Callable[[Sequence[JournalRow]], list[OutboxMessage]]:
        table_id = self.params.table_id

        def build(rows: Sequence[JournalRow]) -> list[OutboxMessage]:
            out = []
            engine_rows = [r for r in rows if r.category == "engine"]
            for event, row in zip(events, engine_rows, strict=True):  # one row per event
                payload = event_payload(table_id, row.seq, event)
                if payload is not None:
                    out.append(OutboxMessage(self.topics.event, dumps(payload), qos=1))
            return out

        return build

    def system_outbox(
        self, kind: str, detail: Mapping[str, Any]
    ) -> Callable[[Sequence[JournalRow]], list[OutboxMessage]]:
        table_id = self.params.table_id

        def build(rows: Sequence[JournalRow]) -> list[OutboxMessage]:
            return [
                OutboxMessage(
                    self.topics.event,
                    dumps(system_payload(kind, table_id, row.seq, row.at, detail)),
                    qos=1,
                )
                for row in rows
            ]

        return build

    # ------------------------------------------------------------- journal
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
            await self._ledger_failed(exc)
            return False
        self._last_write = time.monotonic()
        self.publisher.wake()
        return True

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
        self, command: Command, *, idempotency_key: str | None = None, started: float | None = None
    ) -> str | None:
        """As :meth:`apply`, returning ``None`` when applied, else why not."""
        async with self.lock:
            return await self._apply_locked(command, idempotency_key, started)

    async def _apply_locked(
        self, command: Command, idempotency_key: str | None, started: float | None = None
    ) -> str | None:
        # The engine's events carry the command's time: stamp it in journal order now (no
        # await before the write is queued, so no other write can come between).
        command = replace(command, at=self.journal_clock.stamp(command.at))
        if isinstance(command, Lock) and not self.health.ledger_ok:
            why = "the ledger is unavailable: LOCK refused"
            await self.refuse(why, "ledger-unavailable", command)
            return why
        decision = decide(self.params, self.state, command)
        if not decision.accepted:
            await self.refuse(decision.reason, decision.code, command, idempotency_key)
            return decision.reason
        if not decision.events:
            return None
        try:
            result = await self.commit(
                self.ledger.append,
                decision.events,
                decision.state,
                at=command.at,
                actor=command.actor,
                idempotency_key=idempotency_key,
                outbox=self._event_outbox(decision.events),
            )
        except LedgerUnavailable as exc:
            await self._ledger_failed(exc)
            return f"not journaled: {exc}"
        self._last_write = time.monotonic()
        if result.duplicate:
            log.info("duplicate input ignored", key=idempotency_key)
            return "already applied (the same input was journaled before)"
        self.state = decision.state
        structlog.contextvars.bind_contextvars(round=self.state.round)
        self.hits.count(decision.events)
        if self.metrics is not None:
            self.metrics.count(decision.events)
        if started is not None and result.last_seq >= result.first_seq:
            # the first outbox message of this command carries one of these seqs
            for seq in range(result.first_seq, result.last_seq + 1):
                self._key_started[seq] = started
            if len(self._key_started) > 10_000:
                self._key_started.clear()
        for event in decision.events:
            log.info(
                "event",
                kind=event.kind,
                table=self.params.table_id,
                round=event.round,
                seat=event.seat or None,
            )
        self._notify("applied", {"events": decision.events})
        self.after_change()
        return None

    async def refuse(
        self, reason: str, code: str, command: Command, idempotency_key: str | None = None
    ) -> None:
        log.warning(
            "command rejected",
            reason=reason,
            code=code,
            command=type(command).__name__,
            table=self.params.table_id,
            round=self.state.round,
        )
        self._notify("rejected", {"reason": reason, "code": code})
        if self.metrics is not None:
            self.metrics.rejected.labels(self.params.table_id, code).inc()
        if self.health.ledger_ok:
            await self.record(
                "command_rejected",
                {"command": type(command).__name__, "reason": reason, "code": code},
                actor=command.actor,
                idempotency_key=idempotency_key,
            )

    async def _ledger_failed(self, exc: LedgerError) -> None:
        if self.health.ledger_ok:
            log.error("ledger unavailable: the progressive is closed", error=str(exc))
        self.health.ledger_ok = False
        self.health.last_error = str(exc)
        self.after_change()

    # ------------------------------------------------------------- outputs
    def after_change(self) -> None:
        head = self.ledger.head_seq
        for meter in self.params.meters:
            state = meter_state(self.state, meter.id, self.health.board_online)
            if not self.health.ledger_ok:
                state = "closed"
            self.publisher.set_meter(
                meter.id,
                meter_payload(
                    table_id=self.params.table_id,
                    meter_id=meter.id,
                    units=meter_units(self.state, meter.id),
                    seq=head,
                    state=state,
                    ts=self.clock(),
                ),
            )
        self.publisher.wake()
        shown = lights(self.state, self.params.seats)
        if not self.health.ledger_ok and self.state.phase.value == "open":
            shown = dict.fromkeys(shown, Light.CLOSED)
        if shown != self._lights:
            self._lights = shown
            task = asyncio.get_running_loop().create_task(self.driver.set_lights(shown))
            task.add_done_callback(_log_task_error)

    # ------------------------------------------------------------- inputs
    async def handle_board_event(self, event: BoardEvent) -> None:
        now = self.clock()
        match event:
            case SensorsReported(present=present):
                await self.apply(Sensors(present=present, at=now, actor="board"))
            case KeyPressed():
                started = time.perf_counter()
                outcome = self.keypad.feed(event, now)
                self._notify("key", {"code": event.code, "display": outcome.display})
                if outcome.kind is OutcomeKind.COMMAND and outcome.command is not None:
                    await self.apply(
                        outcome.command,
                        idempotency_key=event.idempotency_key or None,
                        started=started,
                    )
                elif outcome.kind is OutcomeKind.REFUSED:
                    log.warning("key sequence refused", code=event.code, display=outcome.display)
                    await self.record(
                        "key_refused",
                        {"code": event.code, "reason": outcome.display},
                        actor="dealer",
                        idempotency_key=event.idempotency_key or None,
                    )
                if outcome.kind is not OutcomeKind.PENDING:
                    # The sequence is journaled (or refused): only now may the board forget
                    # its presses. A crash before this makes the board send them again, and
                    # the idempotency key stops a second application.
                    self.driver.key_handled(event)
            case SupervisorKey():
                self.keypad.feed(event, now)
                await self.record(
                    "supervisor_key", {"on": event.on}, publish=False, actor="supervisor"
                )
            case BoardOnline(board_id=board_id, protocol_version=version):
                self.health.board_online = True
                await self.record(
                    "board_online", {"board_id": board_id, "protocol_version": version}
                )
                await self.apply(
                    SetClosed(reason=BOARD_OFFLINE, closed=False, at=now, actor="system")
                )
                self._lights = None
                self.after_change()
            case BoardOffline(reason=reason):
                self.health.board_online = False
                self.health.board_offline_since = time.monotonic()
                self.keypad.reset()
                await self.record("board_offline", {"reason": reason})
                await self.apply(
                    SetClosed(reason=BOARD_OFFLINE, closed=True, at=now, actor="system")
                )

    async def _board_loop(self) -> None:
        while True:
            event = await self.driver.next_event()
            self.health.loop_beat = time.monotonic()
            try:
                await self.handle_board_event(event)
            except LedgerError as exc:
                await self._ledger_failed(exc)

    async def _housekeeping(self) -> None:
        """Checkpoint the WAL when idle; retry an unavailable ledger; beat for the watchdog."""
        while True:
            await asyncio.sleep(1.0)
            self.health.loop_beat = time.monotonic()
            if not self.health.ledger_ok:
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
                        continue
                    self.health.ledger_ok = True
                    log.info("ledger available again")
                    self.after_change()
                continue
            idle = time.monotonic() - self._last_write
            if idle >= self.config.ledger.checkpoint_idle_s:
                with contextlib.suppress(LedgerError):
                    await self.db(self.ledger.checkpoint)
                self._last_write = time.monotonic()

    def check_health(self) -> tuple[bool, str]:
        """Healthy = ledger writable, event loop turning, board online (after a grace)."""
        now = time.monotonic()
        wd = self.config.watchdog
        if not self.health.ledger_ok:
            return False, f"ledger unavailable: {self.health.last_error}"
        if now - self.health.loop_beat > wd.loop_stall_s:
            return False, f"event loop stalled for {now - self.health.loop_beat:.1f}s"
        offline_for = now - self.health.board_offline_since
        if not self.health.board_online and offline_for > wd.board_offline_grace_s:
            return False, f"board offline for {offline_for:.0f}s"
        return True, "ok"

    async def _watchdog(self) -> None:
        """Ping systemd's watchdog only while healthy; say why when not."""
        interval = self.notifier.watchdog_interval_s
        if interval is None:
            return
        was_ok = True
        while True:
            ok, why = self.check_health()
            if ok:
                self.notifier.watchdog()
            if ok != was_ok:
                self.notifier.status("healthy" if ok else f"unhealthy: {why}")
                (log.info if ok else log.error)("health", healthy=ok, reason=why)
                was_ok = ok
            await asyncio.sleep(min(interval, 1.0))

    # ------------------------------------------------------------- life
    async def start(self) -> None:
        """Open the ledger (recovering the round in progress) and journal the start."""
        cfg = self.config
        # create=False: a missing ledger is never an empty one (`progressived init` makes it).
        self.ledger = await self.db(
            Ledger.open,
            cfg.ledger.path,
            self.params,
            at=self.clock(),
            software=self.version,
            create=False,
        )
        self.state = self.ledger.state
        structlog.contextvars.bind_contextvars(table=self.params.table_id, round=self.state.round)
        if cfg.metrics.enabled:
            self.metrics = TableMetrics(_Source(self))
            self.metrics_port = self.metrics.serve(cfg.metrics.address, cfg.metrics.port)
            log.info("metrics", address=cfg.metrics.address, port=self.metrics_port)
        await self.record(
            "daemon_started",
            {
                "version": self.version,
                "config_digest": cfg.digest,
                "head_seq": self.ledger.head_seq,
            },
        )
        await self.self_check()
        # Closed until the board says hello; a round in progress keeps its state.
        await self.apply(
            SetClosed(reason=BOARD_OFFLINE, closed=True, at=self.clock(), actor="system")
        )
        self.after_change()

    async def self_check(self) -> bool:
        """Software, configuration and ledger chain head; journaled and published.

        A failure keeps the progressive closed (until a start whose check passes).
        """
        paytable = Path(self.params.paytable.source)
        result = await asyncio.to_thread(
            run_selfcheck,
            ledger_path=self.config.ledger.path,
            config_path=self.config.source,
            paytable_path=paytable if paytable.is_file() else None,
            expected_software=self.config.selfcheck.software_sha256,
        )
        detail = {"ok": result.ok, "problems": result.problems, **result.detail}
        await self.record("self_check", detail)
        now = self.clock()
        if result.ok:
            log.info("self-check passed", **result.detail)
            await self.apply(
                SetClosed(reason=SELF_CHECK_FAILED, closed=False, at=now, actor="system")
            )
        else:
            log.error("self-check failed: the progressive stays closed", problems=result.problems)
            await self.apply(
                SetClosed(reason=SELF_CHECK_FAILED, closed=True, at=now, actor="system")
            )
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

    def request_stop(self) -> None:
        self._stop.set()

    async def run(self, *, install_signals: bool = True) -> int:
        """Run until SIGTERM/SIGINT (or :meth:`request_stop`); returns the exit status."""
        loop = asyncio.get_running_loop()
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.request_stop)
        await self.start()
        tasks = [
            loop.create_task(self.publisher.run(), name="mqtt"),
            loop.create_task(self.driver.run(), name="board"),
            loop.create_task(self._board_loop(), name="input"),
            loop.create_task(self._housekeeping(), name="housekeeping"),
        ]
        if self.notifier.watchdog_interval_s is not None:
            tasks.append(loop.create_task(self._watchdog(), name="watchdog"))
        for task in tasks:
            task.add_done_callback(self._task_ended)
        log.info(
            "running",
            table=self.params.table_id,
            paytable=self.params.paytable.id,
            ledger=str(self.config.ledger.path),
            broker=f"{self.config.mqtt.host}:{self.config.mqtt.port}",
        )
        desk = OperatorDesk(self)
        control = ControlServer(
            self.config.control.socket, self.config.control.group, desk.handle, desk.refused
        )
        await control.start()
        self._control = control
        self._notify("ready", {})
        loop.create_task(self._seed_hits(), name="seed-hits").add_done_callback(_log_task_error)
        self.notifier.ready(f"table {self.params.table_id} running")
        await self._stop.wait()
        self.notifier.stopping()
        await self.shutdown(tasks)
        return self._exit_status

    async def shutdown(self, tasks: Sequence[asyncio.Task[Any]]) -> None:
        """Finish the open transaction, journal the stop, publish offline, close."""
        async with self.lock:  # waits for a command being journaled
            for task in tasks:
                if task.get_name() in ("input", "housekeeping", "watchdog"):
                    task.cancel()
            with contextlib.suppress(LedgerError):
                await self.db(
                    self.ledger.record,
                    "daemon_stopped",
                    {"version": self.version},
                    at=self.clock(),
                    actor="system",
                )
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._drain_outbox(), timeout=2.0)
        if self._control is not None:
            await self._control.stop()
        await self.publisher.stop()
        await self.driver.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.db(self.ledger.close)
        self._executor.shutdown(wait=True)
        log.info("stopped", table=self.params.table_id)

    async def _seed_hits(self) -> None:
        """Hits and wins per hand from the ledger (a read-only scan, off the event loop).

        Commands wait meanwhile (the board is still saying hello at start), so no event
        is counted twice or missed.
        """
        async with self.lock:
            report = await asyncio.to_thread(reports.meters, self.config.ledger.path)
            fresh = HitCounts()
            fresh.seed(report)
            with self.hits.lock:
                self.hits.progressive_in = fresh.progressive_in
                self.hits.hits, self.hits.wins = fresh.hits, fresh.wins

    async def _drain_outbox(self) -> None:
        while self.publisher.connected and len(await self.db(self.ledger.outbox_pending, 1)):
            self.publisher.wake()
            await asyncio.sleep(0.05)


class _Source:
    """The controller as the metrics collector sees it (read from the HTTP thread; the
    state is immutable, so reading the current reference is safe)."""

    def __init__(self, controller: Controller) -> None:
        self.c = controller

    def table_id(self) -> str:
        return self.c.params.table_id

    def meter_ids(self) -> Sequence[str]:
        return self.c.params.meter_ids

    def state(self) -> TableState:
        return self.c.state

    def info(self) -> dict[str, str]:
        c = self.c
        return {
            "version": c.version,
            "paytable": c.params.paytable.id,
            "config_digest": c.config.digest[:16],
        }

    def hit_counts(self) -> HitCounts:
        return self.c.hits

    def board_counters(self) -> Mapping[str, int]:
        return dict(self.c.driver.counters)

    def health(self) -> Sequence[tuple[str, str, bool]]:
        c = self.c
        ok, _ = c.check_health()
        return [
            ("board_online", "The sensor board is online.", c.health.board_online),
            ("broker_connected", "Connected to the MQTT broker.", c.health.broker_connected),
            ("ledger_ok", "The ledger accepts writes.", c.health.ledger_ok),
            (
                "table_open",
                "The progressive is open (LOCK accepted).",
                not c.state.closed and c.health.ledger_ok,
            ),
            ("healthy", "The watchdog is being pinged.", ok),
        ]

    def head_seq(self) -> int:
        return self.c.ledger.head_seq


def _log_task_error(task: asyncio.Future[Any]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("task failed", task=getattr(task, "get_name", lambda: "?")(), error=repr(exc))


async def run_daemon(config: DaemonConfig) -> int:
    controller = Controller(config)
    return await controller.run()
