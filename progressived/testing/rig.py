"""A table on this machine, end to end: a real Mosquitto on a free loopback port, a board
on a pty (the simulator, in the caller's event loop), the daemon as a real process (after
``progressived init``, as an operator does for a new table) and an independent sign.

The project's integration tests, reliability tests and benchmarks all run on this rig; a
board maker's or integrator's tests can too::

    async with table(tmp, RigConfig(table="t-1"), board=simulator_factory()) as t:
        t.start_daemon()
        await t.online()
        await t.bets(1, 3)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from progressived import __version__
from progressived.board.lights import Light
from progressived.config.daemon import load_daemon_config
from progressived.ledger import Ledger
from progressived.runtime.clock import utc_now
from progressived.testing.board import BoardFactory, PtyBoard
from progressived.testing.broker import Mosquitto
from progressived.testing.config import RigConfig, write_config
from progressived.testing.subscriber import Check, Subscriber
from progressived.testing.waits import WaitTimeout, until

# How the rig and the demo run the two commands: this interpreter, this installation.
PROGRESSIVED = [sys.executable, "-m", "progressived.cli.daemon"]
PROGRESSIVECTL = [sys.executable, "-m", "progressived.cli.ctl"]
SENSE_S = 0.3  # the pause after a bet where the board's lights cannot show it sensed
SENSE_TIMEOUT_S = 5.0  # the longest wait for the lights to show a bet sensed


def init_ledger(config: Path, operator: str = "test-harness") -> None:
    """What ``progressived init --config FILE --operator ID`` does, in this process (no
    interpreter start-up; the rig sits below the command line, which imports it for the
    demo): the daemon refuses a missing ledger."""
    loaded = load_daemon_config(config)
    created_by = {"operator": operator, "os_user": getpass.getuser()}
    Ledger.create(
        loaded.ledger.path,
        loaded.params,
        at=utc_now(),
        software=f"progressived {__version__}",
        created_by=created_by,
    ).close()


class NotifySocket:
    """A unix datagram socket standing in for systemd's NOTIFY_SOCKET; notes ``READY=1`` and
    each ``STATUS=`` line (the unit's status, as ``systemctl status`` shows it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.ready_at: float | None = None
        self.statuses: list[str] = []

    def poll(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while True:
                lines = self.sock.recv(65536).split(b"\n")
                if self.ready_at is None and b"READY=1" in lines:
                    self.ready_at = time.perf_counter()
                self.statuses += [
                    line.removeprefix(b"STATUS=").decode("utf-8", "replace")
                    for line in lines
                    if line.startswith(b"STATUS=")
                ]

    def status(self) -> str:
        """The unit's status line as last set ("" if never)."""
        self.poll()
        return self.statuses[-1] if self.statuses else ""

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@dataclass
class Table:
    """The rig's parts and the daemon process (``proc``; each run logs to daemon-N.log)."""

    tmp: Path
    broker: Mosquitto
    sim: PtyBoard
    config: Path
    sub: Subscriber
    proc: subprocess.Popen[bytes] | None = None
    runs: int = 0
    started_at: float = 0.0  # perf_counter at the last start_daemon
    notify_ready: bool = False  # give each run a NOTIFY_SOCKET (``notify``)
    notify: NotifySocket | None = None
    profile: Path | None = None  # run the daemon under cProfile, its stats written here

    def start_daemon(self) -> None:
        self.runs += 1
        log = (self.tmp / f"daemon-{self.runs}.log").open("wb")
        env = dict(os.environ)
        if self.notify_ready:
            if self.notify is not None:
                self.notify.close()
            self.notify = NotifySocket(self.tmp / f"notify-{self.runs}.sock")
            env["NOTIFY_SOCKET"] = str(self.notify.path)
        profile = ["-m", "cProfile", "-o", str(self.profile)] if self.profile else []
        self.started_at = time.perf_counter()
        with log:
            self.proc = subprocess.Popen(
                [
                    *PROGRESSIVED[:1],
                    *profile,
                    *PROGRESSIVED[1:],
                    "run",
                    "--config",
                    str(self.config),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )

    def kill(self, sig: int = signal.SIGKILL) -> int:
        """Signal the daemon and reap it (SIGKILL after 20 s); its exit status."""
        assert self.proc is not None, "the daemon is not running"
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)
        try:
            code = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(timeout=20)
        self.proc = None
        return code

    def stop_daemon(self, sig: int = signal.SIGTERM) -> int:
        """An orderly stop, as systemd asks for one."""
        return self.kill(sig)

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the daemon is not running"
        return self.proc.pid

    def log(self) -> str:
        """Every run's log, in order."""
        return "\n".join(p.read_text() for p in sorted(self.tmp.glob("daemon-*.log")))

    def log_text(self) -> str:
        """The last run's log."""
        return (self.tmp / f"daemon-{self.runs}.log").read_text(errors="replace")

    def logged_running(self) -> bool:
        text = self.log_text()
        return '"event": "running"' in text or '"event":"running"' in text

    async def press(self, *codes: str, pause: float = 0.05) -> None:
        for code in codes:
            self.sim.press(code)
            await asyncio.sleep(pause)

    async def bets(self, *seats: int) -> None:
        for seat in seats:
            self.sim.place_bet(seat)
        await self._sensed(seats, Light.BET, SENSE_S)

    async def collect(self, *seats: int) -> None:
        for seat in seats:
            self.sim.remove_bet(seat)
        await self._sensed(seats, Light.IDLE, 0.1)

    async def _sensed(self, seats: tuple[int, ...], light: Light, pause: float) -> None:
        """Until the daemon has sensed the wagers: in an open round at an open table the
        board shows BET exactly at the sensed seats (docs/protocol.md), so wait for the
        lights; where they cannot tell (a closed table, a round in play, a board without
        ``lights``) a fixed ``pause`` stands in."""
        shown: dict[int, Light] | None = getattr(self.sim, "lights", None)
        if shown is None or any(v not in (Light.IDLE, Light.BET) for v in shown.values()):
            await asyncio.sleep(pause)
            return

        def lit() -> bool:
            now: dict[int, Light] = getattr(self.sim, "lights", {})
            return all(now.get(seat) is light for seat in seats)

        # Bounded softly: a daemon that sends no lights (a fault under test) is the test's
        # to assert; the wait then ends as the pause did, only later.
        with contextlib.suppress(WaitTimeout):
            await until(lit, f"seats {seats} shown {light}", SENSE_TIMEOUT_S)

    async def online(self, count: int = 1, timeout: float = 30.0) -> None:
        """Until the sign has seen ``count`` board_online events; fails at once if the
        daemon exits meanwhile."""

        def seen() -> bool:
            if len(self.sub.events("board_online")) >= count:
                return True
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"the daemon exited:\n{self.log_text()[-2000:]}")
            return False

        await until(seen, f"{count} x board_online", timeout)


@contextlib.asynccontextmanager
async def table(
    tmp: Path,
    config: RigConfig,
    *,
    board: BoardFactory,
    ledger: Path | None = None,
    persistence: bool = True,
    broker_config: str = "",
    sign: str = "rig-sign",
    check: Check | None = None,
    exit_signal: int = signal.SIGTERM,
    notify_ready: bool = False,
    profile: Path | None = None,
    operator: str = "test-harness",
) -> AsyncIterator[Table]:
    """The rig in ``tmp``: ``board(link)`` makes the board, ``config`` the daemon's
    configuration (its ledger made by ``progressived init`` unless it exists). The daemon is
    not started (``start_daemon``); at exit it gets ``exit_signal`` if still running."""
    with Mosquitto(persistence=persistence, extra_config=broker_config) as broker:
        link = tmp / "board"
        sim = board(link)
        await sim.start()
        sub = Subscriber(broker.host, broker.port, identifier=sign, check=check)
        await sub.start()
        path = write_config(
            tmp,
            config,
            broker_host=broker.host,
            broker_port=broker.port,
            link=link,
            ledger=ledger,
        )
        if not (ledger or tmp / "ledger.db").exists():
            init_ledger(path, operator)
        t = Table(tmp, broker, sim, path, sub, notify_ready=notify_ready, profile=profile)
        try:
            yield t
        finally:
            if t.proc is not None and t.proc.poll() is None:
                t.kill(exit_signal)
            if t.notify is not None:
                t.notify.close()
            await sub.stop()
            await sim.stop()
