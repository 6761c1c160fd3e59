"""At most a burst of warnings a window: a flood of refused messages or connections (a
misconfigured or hostile peer) must not flood the log; the number held back is told with
the next line. Shared by the link controller's refusals and the metrics endpoint."""

from __future__ import annotations

import time
from typing import Any

import structlog


class RateLimitedLog:
    """At most ``burst`` warnings per ``window_s`` on ``logger``; the number held back is
    told next time (``suppressed_before``)."""

    def __init__(
        self, burst: int = 10, window_s: float = 60.0, *, logger: Any | None = None
    ) -> None:
        self.burst, self.window_s = burst, window_s
        self.log = logger if logger is not None else structlog.get_logger("progressived")
        self._start = float("-inf")
        self._in_window = 0
        self.suppressed = 0
        self._since_last = 0

    def warning(self, event: str, **fields: Any) -> bool:
        now = time.monotonic()
        if now - self._start >= self.window_s:
            self._start, self._in_window = now, 0
        if self._in_window >= self.burst:
            self.suppressed += 1
            self._since_last += 1
            return False
        self._in_window += 1
        if self._since_last:
            fields["suppressed_before"], self._since_last = self._since_last, 0
        self.log.warning(event, **fields)
        return True
