"""The benchmarks' table: progressived.testing.rig with production defaults (except the
loopback broker and the pty), a sign that timestamps every message (``sub.timed()``,
``sub.expect``), a NOTIFY_SOCKET per run for ``READY=1``, and RSS/CPU readings of the
daemon process."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

from progressived.testing import config as rig_config
from progressived.testing.board import simulator_factory
from progressived.testing.broker import Mosquitto
from progressived.testing.rig import Table
from progressived.testing.rig import table as rig_table

__all__ = ["Table", "cpu_seconds", "rss_bytes", "table", "write_config"]

TABLE = "bench-1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def bench_config(heartbeat_s: float = 1.0) -> rig_config.RigConfig:
    return rig_config.RigConfig(
        table=TABLE,
        meter={"id": "main", "rate": 0.15, "reserve_rate": 0.05},
        board={"heartbeat_interval_s": heartbeat_s},
        mqtt={"reconnect_initial_s": 0.1, "reconnect_max_s": 0.5},
        log={"format": "json", "level": "info"},
    )


def write_config(
    tmp: Path, broker: Mosquitto, link: Path, ledger: Path, *, heartbeat_s: float = 1.0
) -> Path:
    """A daemon configuration: production defaults except the loopback broker and pty."""
    return rig_config.write_config(
        tmp,
        bench_config(heartbeat_s),
        broker_host=broker.host,
        broker_port=broker.port,
        link=link,
        ledger=ledger,
    )


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` (from /proc/PID/statm)."""
    fields = Path(f"/proc/{pid}/statm").read_text().split()
    return int(fields[1]) * PAGE


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (and its waited-for children: none for the daemon)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


@contextlib.asynccontextmanager
async def table(
    tmp: Path, *, ledger: Path | None = None, heartbeat_s: float = 1.0, profile: Path | None = None
) -> AsyncIterator[Table]:
    async with rig_table(
        tmp,
        bench_config(heartbeat_s),
        board=simulator_factory(heartbeat_interval_s=heartbeat_s),
        ledger=ledger,
        persistence=False,
        sign="bench-sign",
        notify_ready=True,
        profile=profile,
        operator="bench",
    ) as t:
        yield t
