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
import time
from dataclasses import dataclass, field
from pathlib import Path

MOSQUITTO_PATHS = (
    "/usr/sbin/mosquitto",
    "/usr/local/sbin/mosquitto",
    "/opt/homebrew/sbin/mosquitto",
)


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


def wait_for_port(host: str, port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
            return
        time.sleep(0.02)
    raise BrokerUnavailable(f"broker did not listen on {host}:{port} within {timeout}s")


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

    def start(self) -> Mosquitto:
        binary = self.binary or find_mosquitto()
        if binary is None:
            raise BrokerUnavailable(
                "Mosquitto is not installed: run 'sudo apt-get install mosquitto mosquitto-clients'"
            )
        self.binary = binary
        # Started as root, Mosquitto drops to its own user: let it write its log and store.
        self.workdir.chmod(0o777)
        conf = self.workdir / "mosquitto.conf"
        conf.write_text(
            f"listener {self.port} {self.host}\nallow_anonymous true\nset_tcp_nodelay true\n"
            f"persistence {'true' if self.persistence else 'false'}\n"
            f"persistence_location {self.workdir}/\n"
            f"log_dest file {self.workdir / 'mosquitto.log'}\n{self.extra_config}"
        )
        self.proc = subprocess.Popen(
            [binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port(self.host, self.port)
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)  # a frozen broker cannot exit
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
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

    def __enter__(self) -> Mosquitto:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
