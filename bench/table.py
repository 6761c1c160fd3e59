"""A table on this machine for the benchmarks: a real Mosquitto on a free loopback port, the
board simulator on a pty (in the caller's event loop), the daemon as a real process and an
independent MQTT subscriber that timestamps every message it receives.

Same shape as tests/daemon_harness.py, but with arrival times, RSS/CPU readings of the
daemon process and an optional NOTIFY_SOCKET for ``READY=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomqtt

from drivers.board_sim import BoardSimulator
from progressived.broker import Mosquitto

TABLE = "bench-1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def write_config(
    tmp: Path, broker: Mosquitto, link: Path, ledger: Path, *, heartbeat_s: float = 1.0
) -> Path:
    """A daemon configuration: production defaults except the loopback broker and pty."""
    path = tmp / "progressived.toml"
    path.write_text(
        f"""
[table]
id = "{TABLE}"
seats = 7
paytable = "tcp-sd-1"

[[progressive.meters]]
id = "main"
rate = 0.15
reserve_rate = 0.05

[board]
driver = "serial"
port = "{link}"
heartbeat_interval_s = {heartbeat_s}

[mqtt]
host = "{broker.host}"
port = {broker.port}
reconnect_initial_s = 0.1
reconnect_max_s = 0.5

[ledger]
path = "{ledger}"

[metrics]
port = 0

[control]
socket = "{tmp / "control.sock"}"

[log]
format = "json"
level = "info"
"""
    )
    return path


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` (from /proc/PID/statm)."""
    fields = Path(f"/proc/{pid}/statm").read_text().split()
    return int(fields[1]) * PAGE


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (and its waited-for children: none for the daemon)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


@dataclass
class Subscriber:
    """An independent sign: every message with its arrival time (``perf_counter``)."""

    broker: Mosquitto
    messages: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    waiters: list[tuple[Callable[[str, dict[str, Any]], bool], asyncio.Future[float]]] = field(
        default_factory=list
    )

    async def _run(self) -> None:
        while True:
            try:
                async with aiomqtt.Client(
                    self.broker.host,
                    self.broker.port,
                    identifier="bench-sign",
                    clean_session=False,
                ) as client:
                    await client.subscribe("progressive/#", qos=1)
                    async for message in client.messages:
                        now = time.perf_counter()
                        payload = message.payload
                        if not isinstance(payload, (bytes, bytearray)):
                            continue
                        topic = str(message.topic)
                        data = json.loads(payload)
                        self.messages.append((now, topic, data))
                        for pair in list(self.waiters):
                            test, fut = pair
                            if not fut.done() and test(topic, data):
                                fut.set_result(now)
                                self.waiters.remove(pair)
            except aiomqtt.MqttError:
                await asyncio.sleep(0.1)

    async def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())
        await asyncio.sleep(0.3)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    def expect(self, test: Callable[[str, dict[str, Any]], bool]) -> asyncio.Future[float]:
        """A future set to the arrival time of the next message ``test`` accepts."""
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiters.append((test, fut))
        return fut

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [m for _, t, m in self.messages if t.endswith("/event") and m.get("kind") == kind]


class NotifySocket:
    """A unix datagram socket standing in for systemd's NOTIFY_SOCKET."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.ready_at: float | None = None

    def poll(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while True:
                data = self.sock.recv(4096)
                if self.ready_at is None and b"READY=1" in data.split(b"\n"):
                    self.ready_at = time.perf_counter()

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@dataclass
class Table:
    tmp: Path
    broker: Mosquitto
    sim: BoardSimulator
    config: Path
    sub: Subscriber
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    runs: int = 0
    notify: NotifySocket | None = None
    profile: Path | None = None  # run the daemon under cProfile, its stats written here

    def start_daemon(self) -> None:
        self.runs += 1
        log = (self.tmp / f"daemon-{self.runs}.log").open("wb")
        env = dict(os.environ)
        if self.notify is not None:
            self.notify.close()
        self.notify = NotifySocket(self.tmp / f"notify-{self.runs}.sock")
        env["NOTIFY_SOCKET"] = str(self.notify.path)
        self.started_at = time.perf_counter()
        profile = ["-m", "cProfile", "-o", str(self.profile)] if self.profile else []
        self.proc = subprocess.Popen(
            [sys.executable, *profile, "-m", "progressived.cli.daemon", "run",
             "--config", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def stop_daemon(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)
        try:
            code = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(timeout=20)
        self.proc = None
        return code

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log_text(self) -> str:
        return (self.tmp / f"daemon-{self.runs}.log").read_text(errors="replace")

    def logged_running(self) -> bool:
        return '"event": "running"' in self.log_text() or '"event":"running"' in self.log_text()

    async def online(self, count: int = 1, timeout: float = 30.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.sub.events("board_online")) < count:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"the daemon exited:\n{self.log_text()[-2000:]}")
                await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def table(
    tmp: Path, *, ledger: Path | None = None, heartbeat_s: float = 1.0, profile: Path | None = None
) -> AsyncIterator[Table]:
    with Mosquitto() as broker:
        link = tmp / "board"
        sim = BoardSimulator(link=link, seats=7, heartbeat_interval_s=heartbeat_s)
        await sim.start()
        sub = Subscriber(broker)
        await sub.start()
        config = write_config(
            tmp, broker, link, ledger or tmp / "ledger.db", heartbeat_s=heartbeat_s
        )
        if not (ledger or tmp / "ledger.db").exists():
            # A new table's ledger is made by `progressived init` (run refuses a missing one).
            from progressived.cli.daemon import main as progressived

            assert progressived(["init", "--config", str(config), "--operator", "bench"]) == 0
        t = Table(tmp, broker, sim, config, sub, profile=profile)
        try:
            yield t
        finally:
            if t.proc is not None and t.proc.poll() is None:
                t.stop_daemon()
            if t.notify is not None:
                t.notify.close()
            await sub.stop()
            await sim.stop()
