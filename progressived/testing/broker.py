"""A private MQTT broker on a free loopback port, for the demo and the tests.

Prefers the system's Mosquitto; without it, ``progressived demo`` can fall back to the
embedded amqtt broker (the optional ``broker`` extra). Never listens off loopback.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from progressived.testing.waits import WaitTimeout, until_sync

MOSQUITTO_PATHS = (
    "/usr/sbin/mosquitto",
    "/usr/local/sbin/mosquitto",
    "/opt/homebrew/sbin/mosquitto",
)


PORT_ATTEMPTS = 5
START_TIMEOUT_S = 30.0  # a bound, not a judgment: a loaded machine starts slowly
TCP_LISTEN = "0A"  # /proc/net/tcp's state of a listening socket


class BrokerUnavailable(RuntimeError):
    """No broker could be started here; the message says what to install."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def find_mosquitto() -> str | None:
    found = shutil.which("mosquitto")
    if found:
        return found
    for path in MOSQUITTO_PATHS:
        if os.access(path, os.X_OK):
            return path
    return None


def accepts(host: str, port: int) -> bool:
    """Whether something accepts a connection on ``host:port`` (whoever it is)."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
        return True
    return False


def wait_for_port(host: str, port: int, timeout: float = 10.0) -> None:
    try:
        until_sync(lambda: accepts(host, port), f"{host}:{port} to listen", timeout)
    except WaitTimeout:
        raise BrokerUnavailable(
            f"broker did not listen on {host}:{port} within {timeout}s"
        ) from None


def listens(pid: int, host: str, port: int) -> bool:
    """Whether process ``pid`` itself holds the listening TCP socket on ``host:port``.

    On Linux, read from /proc (the socket's inode among the process's descriptors); a
    connection would not tell, since it reaches whoever listens there. Elsewhere, whether
    the port accepts a connection."""
    table = Path("/proc/net/tcp")
    if not table.exists():
        return accepts(host, port)
    wanted = f"{socket.inet_aton(host)[::-1].hex().upper()}:{port:04X}"
    inodes = set()
    for line in table.read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == wanted and fields[3] == TCP_LISTEN:
            inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return False
    fds = Path(f"/proc/{pid}/fd")
    with contextlib.suppress(OSError):
        for fd in fds.iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) in inodes:
                    return True
    return False


@dataclass
class Mosquitto:
    """A Mosquitto process on 127.0.0.1:``port``; restartable on the same port."""

    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    binary: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mosquitto-")))
    extra_config: str = ""
    persistence: bool = False  # keep sessions and queued QoS 1 messages across a restart
    _port_chosen: bool = False  # started once: a restart keeps its port
    _log_from: int = 0

    def start(self) -> Self:
        """Start the broker and return once *this* process listens (:func:`listens`). A
        port taken meanwhile (another test's broker, another program) makes
        Mosquitto exit at once; a free port chosen here is then chosen again, since merely
        connecting to the port would reach whoever else listens there."""
        binary = self.binary or find_mosquitto()
        if binary is None:
            raise BrokerUnavailable(
                "Mosquitto is not installed: run 'sudo apt-get install mosquitto mosquitto-clients'"
            )
        self.binary = binary
        # Started as root, Mosquitto drops to its own user: let it write its log and store.
        self.workdir.chmod(0o777)
        for attempt in range(PORT_ATTEMPTS):
            if self._launch(binary):
                self._port_chosen = True
                return self
            if self._port_chosen or attempt == PORT_ATTEMPTS - 1:
                break
            self.port = free_port()
        raise BrokerUnavailable(
            f"Mosquitto could not listen on {self.host}:{self.port}: "
            f"{self._log_tail().strip() or 'no log'}"
        )

    def _launch(self, binary: str) -> bool:
        """One start on ``self.port``: true once it listens, false if it exited."""
        conf = self.workdir / "mosquitto.conf"
        log = self.workdir / "mosquitto.log"
        conf.write_text(
            f"listener {self.port} {self.host}\nallow_anonymous true\nset_tcp_nodelay true\n"
            f"persistence {'true' if self.persistence else 'false'}\n"
            f"persistence_location {self.workdir}/\n"
            f"log_dest file {log}\n{self.extra_config}"
        )
        self._log_from = log.stat().st_size if log.exists() else 0
        proc = subprocess.Popen(
            [binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            until_sync(
                lambda: proc.poll() is not None or listens(proc.pid, self.host, self.port),
                "Mosquitto to listen",
                START_TIMEOUT_S,
                every=0.01,
            )
        except WaitTimeout:
            proc.kill()
            proc.wait(timeout=10)
            raise BrokerUnavailable(f"Mosquitto did not start within {START_TIMEOUT_S} s") from None
        if proc.poll() is not None:
            return False
        self.proc = proc
        return True

    def _log_tail(self) -> str:
        """What this start wrote to the log (it is appended to across restarts)."""
        log = self.workdir / "mosquitto.log"
        try:
            with log.open("rb") as f:
                f.seek(self._log_from)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)  # a frozen broker cannot exit
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def freeze(self) -> None:
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
