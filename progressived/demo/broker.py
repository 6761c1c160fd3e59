"""The demo's MQTT broker: the system's Mosquitto, else the embedded amqtt broker.

Why a module of its own: only ``progressived demo`` falls back to amqtt (the ``broker``
extra), so a machine without Mosquitto can still show the whole product; the daemon and
the tests always use Mosquitto (:mod:`progressived.testing.broker`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from progressived.testing.broker import (
    BrokerUnavailable,
    Mosquitto,
    find_mosquitto,
    free_port,
    wait_for_port,
)


class AmqttBroker:
    """The embedded fallback broker, run as a process like Mosquitto."""

    def __init__(self, workdir: Path) -> None:
        self.host = "127.0.0.1"
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> AmqttBroker:
        exe = shutil.which("amqtt") or str(Path(sys.executable).with_name("amqtt"))
        if not os.access(exe, os.X_OK):
            raise BrokerUnavailable(
                "no MQTT broker: install Mosquitto ('sudo apt-get install mosquitto') or the "
                "embedded broker ('pip install progressived[broker]')"
            )
        conf = self.workdir / "amqtt.yaml"
        conf.write_text(
            "listeners:\n  default:\n    type: tcp\n"
            f"    bind: {self.host}:{self.port}\n"
            "plugins:\n  amqtt.plugins.authentication.AnonymousAuthPlugin:\n"
            "    allow_anonymous: true\n"
        )
        self.proc = subprocess.Popen(
            [exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port(self.host, self.port, timeout=20)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            if self.proc.poll() is None:
                self.proc.kill()


def start_broker(workdir: Path) -> Mosquitto | AmqttBroker:
    """The system's Mosquitto, else amqtt (``PROGRESSIVED_DEMO_BROKER=amqtt`` forces it)."""
    if os.environ.get("PROGRESSIVED_DEMO_BROKER") != "amqtt" and find_mosquitto():
        return Mosquitto().start()
    return AmqttBroker(workdir).start()
