"""The ``floor`` section: a bare SQLite WAL + synchronous=FULL commit plus a bare MQTT QoS 1
round trip, per sample.

Why a module of its own: every latency target is a ratio to this floor, measured in the same
run (docs/performance.md); it must use nothing of progressived but the broker it starts.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import aiomqtt

from bench.measure import summary_ms
from bench.stress import utc_now
from progressived.testing.broker import Mosquitto


async def mqtt_round_trips(broker: Mosquitto, n: int) -> list[float]:
    """Publish QoS 1 (waits for PUBACK) -> a second client receives it; seconds each."""
    times: list[float] = []
    async with (
        aiomqtt.Client(broker.host, broker.port, identifier="floor-sub") as sub,
        aiomqtt.Client(broker.host, broker.port, identifier="floor-pub") as pub,
    ):
        await sub.subscribe("bench/floor", qos=1)
        await asyncio.sleep(0.1)
        messages = sub.messages
        for i in range(n):
            started = time.perf_counter()
            await pub.publish("bench/floor", str(i).encode(), qos=1)
            async with asyncio.timeout(10):
                async for message in messages:
                    if message.payload == str(i).encode():
                        break
            times.append(time.perf_counter() - started)
    return times


def sqlite_commits(path: Path, n: int) -> list[float]:
    """One small row per ``BEGIN IMMEDIATE .. COMMIT`` under WAL + synchronous=FULL."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, at TEXT, data TEXT)")
    times: list[float] = []
    data = json.dumps({"kind": "hand_keyed", "seat": 3, "units": 600_000})
    for _ in range(n):
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (at, data) VALUES (?, ?)", (utc_now(), data))
        conn.execute("COMMIT")
        times.append(time.perf_counter() - started)
    conn.close()
    return times


async def bench_floor(tmp: Path, n: int) -> dict[str, Any]:
    commits = sqlite_commits(tmp / "floor.db", n)
    with Mosquitto() as broker:
        trips = await mqtt_round_trips(broker, n)
    total = [a + b for a, b in zip(commits, trips, strict=True)]
    return {
        "sqlite_commit": summary_ms(commits),
        "mqtt_qos1_round_trip": summary_ms(trips),
        "floor": summary_ms(total),
    }
