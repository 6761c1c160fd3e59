"""Health upkeep: WAL checkpoints and ledger retries, the systemd watchdog, the metrics view."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence

import structlog

from progressived.board.driver import BoardDriver
from progressived.daemon.current import CurrentTable
from progressived.daemon.health import Health, assess, check_health, unit_status
from progressived.daemon.ledger_file import LedgerFileWatch
from progressived.daemon.ledger_writer import LedgerWriter
from progressived.daemon.metrics import HitCounts
from progressived.daemon.port import LinkStatus
from progressived.engine import TableState
from progressived.runtime.systemd import Notifier

log = structlog.get_logger("progressived")


async def housekeeping(writer: LedgerWriter, health: Health) -> None:
    """Checkpoint the WAL when idle; retry an unavailable ledger every ``[ledger] retry_s``;
    notice a ledger file deleted or replaced under the daemon; beat for the watchdog every
    second."""
    last_retry = float("-inf")
    ledger_file = LedgerFileWatch(writer, health)
    while True:
        await asyncio.sleep(1.0)
        health.loop_beat = now = time.monotonic()
        config = writer.current.config
        if await ledger_file.check():
            continue  # no retry, no checkpoint: the file at the path is not this one
        if not health.ledger_ok:
            if now - last_retry >= config.ledger.retry_s:
                last_retry = now
                await writer.retry()
            continue
        last_retry = float("-inf")
        await writer.checkpoint_if_idle(config.ledger.checkpoint_idle_s)


async def watchdog(current: CurrentTable, health: Health, notifier: Notifier) -> None:
    """Log each change of health (the ``health`` line, docs/operations.md "Health") and set
    the unit's status line to it; under a systemd watchdog ping only while the watchdog's
    rule holds (a degraded table is pinged: a restart would not help)."""
    interval = notifier.watchdog_interval_s
    said = (True, "ok")
    while True:
        config = current.config.watchdog
        if check_health(health, config)[0] and interval is not None:
            notifier.watchdog()
        ok, why = assess(health, config, current.state.closed)
        if (ok, why) != said:
            notifier.status(unit_status(ok, why))
            (log.info if ok else log.error)("health", healthy=ok, reason=why)
            said = (ok, why)
        await asyncio.sleep(1.0 if interval is None else min(interval, 1.0))


class MetricsView:
    """The daemon as the metrics collector sees it (read from the HTTP thread; the state is
    immutable, so reading the current reference is safe)."""

    def __init__(
        self,
        *,
        current: CurrentTable,
        health: Health,
        driver: BoardDriver,
        version: str,
        hits: HitCounts,
        link: Callable[[], LinkStatus] | None = None,
    ) -> None:
        self.current = current
        self.hits = hits
        self._health = health
        self.driver = driver
        self.version = version
        self._link = link

    def table_id(self) -> str:
        return self.current.params.table_id

    def meter_ids(self) -> Sequence[str]:
        return self.current.params.meter_ids

    def state(self) -> TableState:
        return self.current.state

    def info(self) -> dict[str, str]:
        config = self.current.config
        return {
            "version": self.version,
            "paytable": config.params.paytable.id,
            "config_digest": config.digest[:16],
        }

    def hit_counts(self) -> HitCounts:
        return self.hits

    def board_counters(self) -> Mapping[str, int]:
        return dict(self.driver.counters)

    def health(self) -> Sequence[tuple[str, str, bool]]:
        h = self._health
        ok, _ = assess(h, self.current.config.watchdog, self.current.state.closed)
        return [
            ("board_online", "The sensor board is online.", h.board_online),
            ("broker_connected", "Connected to the MQTT broker.", h.broker_connected),
            ("ledger_ok", "The ledger accepts writes.", h.ledger_ok),
            (
                "table_open",
                "The progressive is open (LOCK accepted).",
                not self.current.state.closed and h.ledger_ok,
            ),
            (
                "healthy",
                "Healthy: the watchdog's rule (ledger, event loop, board) holds and nothing "
                "degrades the table (broker unreachable or refusing, linked progressive "
                "closed, ledger file deleted or replaced).",
                ok,
            ),
        ]

    def head_seq(self) -> int:
        return self.current.ledger.head_seq

    def broker_denied_total(self) -> int:
        broker = self._health.broker
        return broker.denied_total if broker is not None else 0

    def link(self) -> LinkStatus | None:
        return self._link() if self._link is not None else None
