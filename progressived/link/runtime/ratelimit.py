"""At most a burst of warnings a window: a flood of refused messages (a misconfigured or
hostile table) must not flood the log; the number held back is told with the next line."""

from __future__ import annotations

import time
from typing import Any

import structlog

log = structlog.get_logger("progressived.link")


class RateLimitedLog:
    """At most ``burst`` warnings per ``window_s``; the number held back is told next time."""

    def __init__(self, burst: int = 10, window_s: float = 60.0) -> None:
        self.burst, self.window_s = burst, window_s
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
        log.warning(event, **fields)
        return True
