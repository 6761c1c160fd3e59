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
from dataclasses import dataclass, field
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
from progressived.clock import utc_now
from progressived.config import ConfigError
from progressived.control import ControlServer, Peer
from progressived.engine import (
    AdjustMeter,
    Command,
    Lock,
    Sensors,
    SetClosed,
    TableState,
    TransferMeter,
    accounts,
    decide,
    lights,
)
from progressived.engine.events import Event
from progressived.engine.state import Light
from progressived.keypad import KeypadInterpreter, OutcomeKind
from progressived.ledger import (
    JournalRow,
    Ledger,
    LedgerError,
    LedgerUnavailable,
    OutboxMessage,
    reports,
)
from progressived.metrics import HitCounts, TableMetrics
from progressived.money import MoneyError, cents, display, dollars
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
from progressived.params import TableParams
from progressived.selfcheck import run_selfcheck
from progressived.settings import DaemonConfig, load_daemon_config
from progressived.systemd import Notifier

log = structlog.get_logger("progressived")

BOARD_OFFLINE = "board offline"
SELF_CHECK_FAILED = "self-check failed"
OPERATOR_CLOSED = "operator"
LEDGER_UNAVAILABLE = "ledger unavailable"

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
        self._lock = asyncio.Lock()
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
        self._hits = HitCounts()
        self._key_started: dict[int, float] = {}
        self._control: ControlServer | None = None
        self._exit_status = 0

    # ------------------------------------------------------------- plumbing
    async def db(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a ledger call on the ledger thread."""
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

    # ------------------------------------------------------------- metrics source
    def table_id(self) -> str:
        return self.params.table_id

    def meter_ids(self) -> Sequence[str]:
        return self.params.meter_ids

    def current_state(self) -> TableState:
        return self.state

    def info(self) -> dict[str, str]:
        return {
            "version": self.version,
            "paytable": self.params.paytable.id,
            "config_digest": self.config.digest[:16],
        }

    def hit_counts(self) -> HitCounts:
        return self._hits

    def board_counters(self) -> Mapping[str, int]:
        return dict(self.driver.counters)

    def health_gauges(self) -> Sequence[tuple[str, str, bool]]:
        ok, _ = self.check_health()
        return [
            ("board_online", "The sensor board is online.", self.health.board_online),
            ("broker_connected", "Connected to the MQTT broker.", self.health.broker_connected),
            ("ledger_ok", "The ledger accepts writes.", self.health.ledger_ok),
            (
                "table_open",
                "The progressive is open (LOCK accepted).",
                not self.state.closed and self.health.ledger_ok,
            ),
            ("healthy", "The watchdog is being pinged.", ok),
        ]

    def head_seq(self) -> int:
        return self.ledger.head_seq

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
            for event, row in zip(events, engine_rows, strict=False):
                payload = event_payload(table_id, row.seq, event)
                if payload is not None:
                    out.append(OutboxMessage(self.topics.event, dumps(payload), qos=1))
            return out

        return build

    def _system_outbox(
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
                outbox=self._system_outbox(kind, detail) if publish else None,
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
        async with self._lock:
            return await self._apply_locked(command, idempotency_key, started)

    async def _apply_locked(
        self, command: Command, idempotency_key: str | None, started: float | None = None
    ) -> bool:
        if isinstance(command, Lock) and not self.health.ledger_ok:
            await self._refuse(
                "the ledger is unavailable: LOCK refused", "ledger-unavailable", command
            )
            return False
        decision = decide(self.params, self.state, command)
        if not decision.accepted:
            await self._refuse(decision.reason, decision.code, command, idempotency_key)
            return False
        if not decision.events:
            return True
        try:
            result = await self.commit(
                self.ledger.append,
                decision.events,
                decision.state,
                at=command.at or self.clock(),
                actor=command.actor,
                idempotency_key=idempotency_key,
                outbox=self._event_outbox(decision.events),
            )
        except LedgerUnavailable as exc:
            await self._ledger_failed(exc)
            return False
        self._last_write = time.monotonic()
        if result.duplicate:
            log.info("duplicate input ignored", key=idempotency_key)
            return False
        self.state = decision.state
        structlog.contextvars.bind_contextvars(round=self.state.round)
        self._hits.count(decision.events)
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
        self._after_change()
        return True

    async def _refuse(
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
        self._after_change()

    # ------------------------------------------------------------- outputs
    def _after_change(self) -> None:
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
                self._after_change()
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
                async with self._lock:
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
                    self._after_change()
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

    # ------------------------------------------------------------- operator actions
    def status(self) -> dict[str, Any]:
        ok, why = self.check_health()
        return {
            "table": self.params.table_id,
            "paytable": self.params.paytable.id,
            "version": self.version,
            "round": self.state.round,
            "phase": self.state.phase.value,
            "locked_seats": sorted(self.state.locked),
            "pending_awards": [
                {"seat": a.seat, "hand": a.hand, "cents": cents(a.units)}
                for a in self.state.pending
            ],
            "closed": sorted(self.state.closed),
            "meters": {
                m: {
                    "display": display(self.state.balance(accounts.meter(m))),
                    "cents": cents(self.state.balance(accounts.meter(m))),
                    "reserve_cents": cents(self.state.balance(accounts.reserve(m))),
                    "overflow_cents": cents(self.state.balance(accounts.overflow(m))),
                    "state": meter_state(self.state, m, self.health.board_online),
                }
                for m in self.params.meter_ids
            },
            "board": {"online": self.health.board_online, "counters": dict(self.driver.counters)},
            "broker": {"connected": self.health.broker_connected},
            "ledger": {
                "ok": self.health.ledger_ok,
                "head_seq": self.ledger.head_seq,
                "path": str(self.config.ledger.path),
                "error": self.health.last_error if not self.health.ledger_ok else "",
            },
            "healthy": ok,
            "health": why,
            "metrics_port": self.metrics_port,
        }

    async def control(self, request: Mapping[str, Any], peer: Peer) -> dict[str, Any]:
        """One control-socket request (see progressived.control)."""
        action = str(request.get("action", ""))
        if action == "status":
            return {"ok": True, "status": self.status()}
        operator = str(request.get("operator", "")).strip()
        reason = str(request.get("reason", "")).strip()
        approver = str(request.get("approver", "")).strip()
        if not operator or not reason:
            return {"ok": False, "error": "an operator id and a reason are required"}
        who = {"operator": operator, "reason": reason, "uid": peer.uid, "pid": peer.pid}
        now = self.clock()
        if action in ("close", "open"):
            closing = action == "close"
            if not await self.record(f"operator_{action}", who, actor=operator):
                return {"ok": False, "error": "the ledger is unavailable"}
            await self.apply(
                SetClosed(reason=OPERATOR_CLOSED, closed=closing, at=now, actor=operator)
            )
            return {"ok": True, "closed": sorted(self.state.closed)}
        if action == "reload":
            return await self.reload_parameters(operator, approver, reason, peer)
        if action in ("adjust", "transfer"):
            try:
                units = dollars(str(request.get("amount", "")))
            except MoneyError as exc:
                return {"ok": False, "error": str(exc)}
            command: Command
            if action == "adjust":
                command = AdjustMeter(
                    meter=str(request.get("meter", "main")),
                    units=units,
                    reason=reason,
                    approved_by=approver,
                    actor=operator,
                    at=now,
                )
            else:
                command = TransferMeter(
                    from_meter=str(request.get("from", "")),
                    to_meter=str(request.get("to", "")),
                    units=units,
                    reason=reason,
                    approved_by=approver,
                    actor=operator,
                    at=now,
                )
            decision = decide(self.params, self.state, command)
            if not decision.accepted:
                await self._refuse(decision.reason, decision.code, command)
                return {"ok": False, "error": decision.reason}
            applied = await self.apply(command)
            return (
                {"ok": applied, "status": self.status()}
                if applied
                else {"ok": False, "error": "not applied (see the log)"}
            )
        return {"ok": False, "error": f"unknown action {action!r}"}

    async def reload_parameters(
        self, operator: str, approver: str, reason: str, peer: Peer
    ) -> dict[str, Any]:
        """Re-read the configuration file and apply new progressive parameters.

        Refused while a round is open or an award awaits the supervisor, without a second
        person's approval, or when the new file is invalid, names another table, changes the
        set of meters, or sets a limit below a meter's current amount. Journaled with the
        old and new values. Board, MQTT and ledger settings take effect at the next start.
        """
        if not approver or approver == operator:
            return {"ok": False, "error": "a second person must approve (two-person control)"}
        async with self._lock:
            if self.state.phase.value != "open" or self.state.pending:
                return {
                    "ok": False,
                    "error": "refused while a round is open: reconcile or void it first",
                }
            try:
                new = load_daemon_config(self.config.source)
            except ConfigError as exc:
                return {"ok": False, "error": str(exc)}
            old, params = self.params, new.params
            if params.table_id != old.table_id:
                return {"ok": False, "error": "the table id cannot change"}
            if params.meter_ids != old.meter_ids:
                return {"ok": False, "error": "the set of meters cannot change while running"}
            for meter in params.meters:
                current = self.state.balance(accounts.meter(meter.id))
                if meter.limit is not None and meter.limit < current:
                    return {
                        "ok": False,
                        "error": f"meter {meter.id}: a limit must be at least the current amount",
                    }
            changes = _param_changes(old, params)
            if not changes:
                return {"ok": True, "changes": {}}
            detail = {
                "changes": changes,
                "operator": operator,
                "approver": approver,
                "reason": reason,
                "config_digest": new.digest,
                "uid": peer.uid,
            }
            try:
                await self.commit(
                    self.ledger.record,
                    "parameter_changed",
                    detail,
                    at=self.clock(),
                    actor=operator,
                    round=self.state.round,
                    outbox=self._system_outbox("parameter_changed", detail),
                )
            except LedgerError as exc:
                return {"ok": False, "error": f"not journaled: {exc}"}
            self.params = params
            self.config = new
            self.keypad = KeypadInterpreter(new.keypad, params.paytable.hand_ids, params.seats)
            log.info("parameters changed", changes=changes, operator=operator, approver=approver)
        self._after_change()
        return {"ok": True, "changes": changes}

    # ------------------------------------------------------------- life
    async def start(self) -> None:
        """Open the ledger (recovering the round in progress) and journal the start."""
        cfg = self.config
        cfg.ledger.path.parent.mkdir(parents=True, exist_ok=True)
        self.ledger = await self.db(
            Ledger.open, cfg.ledger.path, self.params, at=self.clock(), software=self.version
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
        self._after_change()

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
        control = ControlServer(
            self.config.control.socket,
            self.config.control.group,
            self.control,
            self._control_refused,
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
        async with self._lock:  # waits for a command being journaled
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

    async def _control_refused(self, peer: Peer, why: str) -> None:
        await self.record("control_refused", {"uid": peer.uid, "pid": peer.pid, "reason": why})

    async def _seed_hits(self) -> None:
        """Hits and wins per hand from the ledger (a read-only scan, off the event loop).

        Commands wait meanwhile (the board is still saying hello at start), so no event
        is counted twice or missed.
        """
        async with self._lock:
            report = await asyncio.to_thread(reports.meters, self.config.ledger.path)
            fresh = HitCounts()
            fresh.seed(report)
            with self._hits.lock:
                self._hits.progressive_in = fresh.progressive_in
                self._hits.hits, self._hits.wins = fresh.hits, fresh.wins

    async def _drain_outbox(self) -> None:
        while self.publisher.connected and len(await self.db(self.ledger.outbox_pending, 1)):
            self.publisher.wake()
            await asyncio.sleep(0.05)


def _param_changes(old: TableParams, new: TableParams) -> dict[str, Any]:
    """Old and new values of every progressive parameter that differs (JSON-ready)."""

    def describe(p: TableParams) -> dict[str, Any]:
        out: dict[str, Any] = {
            "paytable": p.paytable.id,
            "wager_units": p.wager_units,
            "policy": p.policy.value,
            "award_order": p.award_order.value,
            "seats": p.seats,
        }
        for m in p.meters:
            out[f"meters.{m.id}.seed_units"] = m.seed
            out[f"meters.{m.id}.rate"] = str(m.rate)
            out[f"meters.{m.id}.reserve_rate"] = str(m.reserve_rate)
            out[f"meters.{m.id}.limit_units"] = m.limit
            out[f"meters.{m.id}.above_limit"] = m.above_limit.value
        return out

    before, after = describe(old), describe(new)
    return {k: {"old": before[k], "new": after[k]} for k in after if before.get(k) != after[k]}


class _Source:
    """The controller seen by the metrics collector (read from the HTTP thread)."""

    def __init__(self, controller: Controller) -> None:
        self.c = controller

    def table_id(self) -> str:
        return self.c.table_id()

    def meter_ids(self) -> Sequence[str]:
        return self.c.meter_ids()

    def state(self) -> TableState:
        return self.c.current_state()

    def info(self) -> dict[str, str]:
        return self.c.info()

    def hit_counts(self) -> HitCounts:
        return self.c.hit_counts()

    def board_counters(self) -> Mapping[str, int]:
        return self.c.board_counters()

    def health(self) -> Sequence[tuple[str, str, bool]]:
        return self.c.health_gauges()

    def head_seq(self) -> int:
        return self.c.head_seq()


def _log_task_error(task: asyncio.Future[Any]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("task failed", task=getattr(task, "get_name", lambda: "?")(), error=repr(exc))


async def run_daemon(config: DaemonConfig) -> int:
    controller = Controller(config)
    return await controller.run()
