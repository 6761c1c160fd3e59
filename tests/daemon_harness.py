"""A table on this machine for the integration tests: a real Mosquitto on a loopback port,
the board simulator on a pty (in the test's event loop), the daemon as a real process, and
an independent MQTT subscriber with a persistent session."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomqtt

from drivers.board_sim import BoardSimulator
from progressived.broker import Mosquitto
from tests.mqtt_schemas import problems

TABLE = "it-1"
METER_TOPIC = f"progressive/table/{TABLE}/meter/main"


def write_config(tmp: Path, broker: Mosquitto, link: Path, **extra: str) -> Path:
    path = tmp / "progressived.toml"
    path.write_text(
        f"""
[table]
id = "{TABLE}"
seats = 7
paytable = "{extra.get("paytable", "tcp-sd-1")}"

[[progressive.meters]]
id = "main"
rate = 0.15
reserve_rate = 0.02

[board]
driver = "serial"
port = "{link}"
heartbeat_interval_s = 0.2
missed_heartbeats = 15
reconnect_initial_s = 0.1
reconnect_max_s = 0.5

[mqtt]
host = "{broker.host}"
port = {broker.port}
keepalive_s = 5
meter_max_rate_hz = 20
reconnect_initial_s = 0.1
reconnect_max_s = 0.5

[ledger]
path = "{tmp / "ledger.db"}"

[metrics]
port = {extra.get("metrics_port", "0")}

[control]
socket = "{tmp / "control.sock"}"

[log]
format = "json"
level = "debug"
"""
    )
    return path


def init_ledger(config: Path, operator: str = "test-harness") -> None:
    """`progressived init --config FILE`, as an operator does before a new table's first
    run (the daemon refuses a missing ledger)."""
    from progressived.cli.daemon import main as progressived

    assert progressived(["init", "--config", str(config), "--operator", operator]) == 0


@dataclass
class Subscriber:
    """An independent sign: records every message it receives, across broker restarts, and
    every way one differs from docs/mqtt.md's schemas (``table`` fails the test on any)."""

    broker: Mosquitto
    messages: list[tuple[str, dict[str, Any], bool]] = field(default_factory=list)
    schema_problems: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            try:
                async with aiomqtt.Client(
                    self.broker.host, self.broker.port, identifier="it-sign", clean_session=False
                ) as client:
                    await client.subscribe("progressive/#", qos=1)
                    async for message in client.messages:
                        payload = message.payload
                        if isinstance(payload, (bytes, bytearray)):
                            data = json.loads(payload)
                            self.messages.append((str(message.topic), data, bool(message.retain)))
                            self.schema_problems.extend(problems(str(message.topic), data))
            except aiomqtt.MqttError:
                await asyncio.sleep(0.1)

    async def start(self) -> None:
        self.task = asyncio.create_task(self._run())
        await asyncio.sleep(0.3)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [
            m
            for t, m, _ in self.messages
            if t.endswith("/event") and (kind is None or m.get("kind") == kind)
        ]

    def meters(self) -> list[dict[str, Any]]:
        return [m for t, m, _ in self.messages if t == METER_TOPIC]

    async def wait(self, predicate: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                await asyncio.sleep(0.05)
        assert predicate(), what

    async def wait_event(self, kind: str, count: int = 1, timeout: float = 15.0) -> dict[str, Any]:
        await self.wait(lambda: len(self.events(kind)) >= count, f"{count} x {kind}", timeout)
        return self.events(kind)[count - 1]


@dataclass
class Table:
    tmp: Path
    broker: Mosquitto
    sim: BoardSimulator
    config: Path
    sub: Subscriber
    proc: subprocess.Popen[bytes] | None = None
    runs: int = 0

    def start_daemon(self) -> None:
        self.runs += 1
        log = (self.tmp / f"daemon-{self.runs}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "progressived.cli.daemon", "run", "--config", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def kill(self, sig: int = signal.SIGKILL) -> int:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)
        code = self.proc.wait(timeout=20)
        self.proc = None
        return code

    def log(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.tmp.glob("daemon-*.log")))

    async def press(self, *codes: str, pause: float = 0.05) -> None:
        for code in codes:
            self.sim.press(code)
            await asyncio.sleep(pause)

    async def bets(self, *seats: int) -> None:
        for seat in seats:
            self.sim.place_bet(seat)
        await asyncio.sleep(0.3)

    async def collect(self, *seats: int) -> None:
        for seat in seats:
            self.sim.remove_bet(seat)
        await asyncio.sleep(0.1)

    async def online(self, count: int = 1) -> None:
        await self.sub.wait_event("board_online", count, timeout=30)


@contextlib.asynccontextmanager
async def table(tmp: Path, *, persistence: bool = True, **extra: str):  # type: ignore[no-untyped-def]
    with Mosquitto(persistence=persistence) as broker:
        link = tmp / "board"
        sim = BoardSimulator(link=link, seats=7, heartbeat_interval_s=0.2)
        await sim.start()
        sub = Subscriber(broker)
        await sub.start()
        t = Table(tmp, broker, sim, write_config(tmp, broker, link, **extra), sub)
        if not (tmp / "ledger.db").exists():
            init_ledger(t.config)
        try:
            yield t
        finally:
            if t.proc is not None and t.proc.poll() is None:
                t.kill(signal.SIGTERM)
            await sub.stop()
            await sim.stop()
        # Every message the daemon published matches docs/mqtt.md (kinds, keys, types).
        assert not sub.schema_problems, "\n".join(sub.schema_problems[:20])
