"""The one log throttle: at most a burst of lines a window, per kind of line.

A flood of refused messages or connections (a misconfigured or hostile peer), a board
babbling bad frames, a publisher sending malformed messages to a sign: each must not flood
the log or the terminal, and the number held back is told with the next line said. Every
rate-limited line of the product goes through :class:`RateLimitedLog`: the control socket's
and the metrics endpoint's refusals, the table's link client (unreadable messages, the
link's refusals), the link controller's refusals, the board driver's wire errors and
repeated conditions, and the signs' lines about malformed messages and their own troubles.

Each *kind* of line (``per``: a refusal code, a trouble, an event name) has its own window,
so a flood of one kind never silences another; the kinds are the callers' own codes (a
bounded set), and at most ``max_kinds`` are remembered (the oldest forgotten) whatever a
caller passes. The clock is injected (monotonic seconds), so the rule is tested without
waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import structlog

__all__ = ["RateLimitedLog"]

MAX_KINDS = 1024


@dataclass(slots=True)
class _Window:
    start: float
    said: int = 0  # lines said in this window
    held: int = 0  # lines held back since the last one said


class RateLimitedLog:
    """At most ``burst`` lines per ``window_s`` of each kind (``per``) on ``logger``; the
    number held back is told with the next line of that kind (``suppressed_before``)."""

    def __init__(
        self,
        burst: int = 10,
        window_s: float = 60.0,
        *,
        logger: Any | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_kinds: int = MAX_KINDS,
    ) -> None:
        self.burst, self.window_s = burst, window_s
        self.log = logger if logger is not None else structlog.get_logger("progressived")
        self.clock = clock
        self.max_kinds = max_kinds
        self.suppressed = 0  # lines held back in all (every kind)
        self._windows: dict[Hashable, _Window] = {}

    def admit(self, per: Hashable = None) -> int | None:
        """May a line of kind ``per`` be said now? ``None``: no (it is counted as held
        back); else the number of its kind held back since the last one said."""
        now = self.clock()
        window = self._windows.get(per)
        if window is None or now - window.start >= self.window_s:
            held = 0 if window is None else window.held
            if window is None and len(self._windows) >= self.max_kinds:
                del self._windows[next(iter(self._windows))]
            window = self._windows[per] = _Window(now, 0, held)
        if window.said >= self.burst:
            window.held += 1
            self.suppressed += 1
            return None
        window.said += 1
        held, window.held = window.held, 0
        return held

    def held(self, per: Hashable = None) -> int:
        """Lines of kind ``per`` held back since the last one said (told with the next)."""
        window = self._windows.get(per)
        return 0 if window is None else window.held

    def forget(self, per: Hashable = None) -> None:
        """Start kind ``per`` afresh: its next line is said at once (a new streak)."""
        self._windows.pop(per, None)

    def say(self, level: str, event: str, *, per: Hashable = None, **fields: Any) -> bool:
        """Log ``event`` at ``level`` unless its kind is over the limit; True when logged."""
        held = self.admit(per)
        if held is None:
            return False
        if held:
            fields["suppressed_before"] = held
        getattr(self.log, level)(event, **fields)
        return True

    def warning(self, event: str, *, per: Hashable = None, **fields: Any) -> bool:
        return self.say("warning", event, per=per, **fields)

    def error(self, event: str, *, per: Hashable = None, **fields: Any) -> bool:
        return self.say("error", event, per=per, **fields)
