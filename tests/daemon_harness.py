"""The integration tests' table: progressived.testing.rig with the tests' configuration
(fast heartbeats and reconnects, debug logs) and a sign that checks every message against
docs/mqtt.md's schemas (``table`` fails the test on any difference)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path

from progressived.testing import config as rig_config
from progressived.testing.board import simulator_factory
from progressived.testing.broker import Mosquitto
from progressived.testing.rig import Table, init_ledger
from progressived.testing.rig import table as rig_table
from tests.mqtt_schemas import problems

__all__ = [
    "METER_TOPIC",
    "TABLE",
    "Table",
    "harness_config",
    "init_ledger",
    "table",
    "write_config",
]

TABLE = "it-1"
METER_TOPIC = f"progressive/table/{TABLE}/meter/main"


def harness_config(paytable: str = "tcp-sd-1", metrics_port: str = "0") -> rig_config.RigConfig:
    return rig_config.RigConfig(
        table=TABLE,
        paytable=paytable,
        board={
            "heartbeat_interval_s": 0.2,
            "missed_heartbeats": 15,
            "reconnect_initial_s": 0.1,
            "reconnect_max_s": 0.5,
        },
        mqtt={
            "keepalive_s": 5,
            "meter_max_rate_hz": 20,
            "reconnect_initial_s": 0.1,
            "reconnect_max_s": 0.5,
        },
        metrics_port=int(metrics_port),
        log={"format": "json", "level": "debug"},
    )


def write_config(tmp: Path, broker: Mosquitto, link: Path, **extra: str) -> Path:
    return rig_config.write_config(
        tmp, harness_config(**extra), broker_host=broker.host, broker_port=broker.port, link=link
    )


@contextlib.asynccontextmanager
async def table(
    tmp: Path,
    *,
    persistence: bool = True,
    broker_config: str = "",
    exit_signal: int = signal.SIGTERM,
    check_schemas: bool = True,
    **extra: str,
) -> AsyncIterator[Table]:
    async with rig_table(
        tmp,
        harness_config(**extra),
        board=simulator_factory(heartbeat_interval_s=0.2),
        persistence=persistence,
        broker_config=broker_config,
        sign="it-sign",
        check=problems,
        exit_signal=exit_signal,
    ) as t:
        yield t
    # Every message the daemon published matches docs/mqtt.md (kinds, keys, types).
    if check_schemas:
        assert not t.sub.problems, "\n".join(t.sub.problems[:20])
