"""systemd integration: ``sd_notify`` READY / WATCHDOG / STATUS / STOPPING.

The notify protocol is one datagram to the unix socket named by ``$NOTIFY_SOCKET``; it is
small and stable enough to speak directly (python-systemd needs libsystemd headers to
build, and the pure-Python wrappers on PyPI are unmaintained). Outside systemd every call
is a no-op.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


class Notifier:
    """Sends notifications to systemd when run under ``Type=notify``."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET", "")
        if address.startswith("@"):
            address = "\0" + address[1:]  # abstract namespace
        self.address = address
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        self.watchdog_usec = (
            int(usec) if usec.isdigit() and (not pid or pid == str(os.getpid())) else 0
        )

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    @property
    def watchdog_interval_s(self) -> float | None:
        """How often to ping: half the watchdog timeout, as systemd recommends."""
        return self.watchdog_usec / 2_000_000 if self.watchdog_usec else None

    def notify(self, *fields: str) -> bool:
        if not self.address:
            return False
        message = "\n".join(fields).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            try:
                sock.sendto(message, self.address)
            except OSError:
                return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def status(self, status: str) -> bool:
        return self.notify(f"STATUS={status}")

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")
