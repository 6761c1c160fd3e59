"""The ``startup`` and ``idle`` sections: daemon start -> READY on the big ledger,
``ledger verify`` against its floor (bench/verify.py), and idle CPU.

Why a module of its own: both watch one daemon on one ledger, started once.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from bench.measure import MB
from bench.table import cpu_seconds, rss_bytes, table
from bench.verify import bench_verify


async def bench_startup_idle(
    tmp: Path, ledger: Path | None, idle_s: float, do_startup: bool, do_idle: bool,
    repeat: int = 3,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with table(tmp, ledger=ledger) as t:
        if ledger is not None and ledger.exists():
            with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as conn:
                out["ledger_events"] = conn.execute("SELECT max(seq) FROM journal").fetchone()[0]
        t.start_daemon()
        marks: dict[str, float] = {}
        status_fut = t.sub.expect(
            lambda topic, m: topic.endswith("/status") and m.get("status") == "online"
            and m.get("ts", "") > ""
        )
        meter_fut = t.sub.expect(lambda topic, m: "/meter/" in topic)
        deadline = time.perf_counter() + 60
        while time.perf_counter() < deadline and len(marks) < 4:
            assert t.notify is not None
            t.notify.poll()
            if t.notify.ready_at is not None and "ready_notify" not in marks:
                marks["ready_notify"] = t.notify.ready_at
            if "log_running" not in marks and t.logged_running():
                marks["log_running"] = time.perf_counter()
            if status_fut.done() and "status_online" not in marks:
                marks["status_online"] = status_fut.result()
            if meter_fut.done() and "first_meter" not in marks:
                marks["first_meter"] = meter_fut.result()
            if t.proc is not None and t.proc.poll() is not None:
                raise RuntimeError(f"daemon exited:\n{t.log_text()[-2000:]}")
            await asyncio.sleep(0.002)
            if len(marks) == 3 and "ready_notify" not in marks and time.perf_counter() > (
                t.started_at + 5
            ):
                break  # this daemon does not send READY=1 (yet)
        out["ready_s"] = {k: round(v - t.started_at, 3) for k, v in sorted(marks.items())}
        await t.online()
        await asyncio.sleep(2.0)
        out["daemon_rss_mb_after_start"] = round(rss_bytes(t.pid) / MB, 1)
        if do_idle:
            cpu0, wall0 = cpu_seconds(t.pid), time.perf_counter()
            await asyncio.sleep(idle_s)
            cpu1, wall1 = cpu_seconds(t.pid), time.perf_counter()
            out["idle"] = {
                "window_s": round(wall1 - wall0, 1),
                "cpu_s": round(cpu1 - cpu0, 3),
                "cpu_percent": round(100 * (cpu1 - cpu0) / (wall1 - wall0), 3),
                "board_heartbeat_s": t.sim.heartbeat_interval_s,
            }
        assert t.stop_daemon() == 0
    if do_startup and ledger is not None:
        config = ledger.with_name("memloop.toml")  # the memory loop's: the same table
        out["verify"] = bench_verify(
            ledger, repeat=repeat, config=config if config.exists() else None
        )
    return out
