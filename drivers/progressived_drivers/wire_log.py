"""Rate-limited warnings for wire errors (docs/protocol.md, "Wire errors in the log").

Every rejected frame is counted (the driver's counters); this module decides which of them
also make a log line. A babbling line (a wrong baud rate, a broken cable, a board looping on
one bad frame) can produce thousands of bad frames a second: logging each would flood the
journal and hide everything else. So at most ``burst`` warnings are logged per ``window_s``;
the rest are only counted, and the first warning after a quiet spell says how many were
suppressed since the last one logged. The limits are the product's one log throttle
(:class:`progressived.runtime.ratelimit.RateLimitedLog`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from progressived.runtime.ratelimit import RateLimitedLog
from progressived_drivers import protocol as p

log = structlog.get_logger("drivers.wire")
driver_log = structlog.get_logger("drivers.serial_board")
#: While the port cannot be opened: one warning per streak, then one a minute.
CONNECT_FAILED_LOG_EVERY_S = 60.0

#: Conditions that repeat every heartbeat while they last (a board with too few seats, a
#: wager on a seat beyond the table): one line, then at most one a minute per event.
REPEATED_LOG_EVERY_S = 60.0

#: Wire errors logged at warning level per window (docs/protocol.md, "Wire errors").
WIRE_LOG_BURST = 10
WIRE_LOG_WINDOW_S = 60.0
#: Bytes of a rejected chunk shown in the log (hex); longer samples end with "..".
SAMPLE_BYTES = 24


def hex_sample(data: bytes, limit: int = SAMPLE_BYTES) -> str:
    """``data`` as hex, cut to ``limit`` bytes (then ending with ``..``)."""
    text = bytes(data[:limit]).hex()
    return text + ".." if len(data) > limit else text


class WireErrorLog:
    """Logs wire errors at warning level, at most ``burst`` lines per ``window_s`` seconds.

    ``context`` returns extra fields for every line (the port, the table's round ...).
    """

    def __init__(
        self,
        *,
        burst: int = 10,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        context: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self._limit = RateLimitedLog(burst, window_s, logger=log, clock=clock)
        self._context = context
        self.logged = 0  # warnings written

    @property
    def suppressed(self) -> int:
        """Wire errors not logged because of the rate limit (in total)."""
        return self._limit.suppressed

    def report(self, kind: str, sample: bytes, **fields: Any) -> bool:
        """One wire error of ``kind`` with the offending bytes; True when it was logged."""
        extra = dict(self._context()) if self._context is not None else {}
        logged = self._limit.warning(
            "board wire error",
            kind=kind,
            sample=hex_sample(sample),
            length=len(sample),
            **extra,
            **fields,
        )
        self.logged += logged
        return logged


class DriverLog:
    """The serial driver's log context and its wire-error reporting.

    The daemon binds its table and current round in its own structlog context; the driver's
    task was started with a copy made before the first round, so the driver takes the
    daemon's context whenever the daemon calls it (:meth:`adopt_context`) and adds it to
    every line. Wire errors count in ``wire_errors_logged`` or ``wire_errors_suppressed``.
    """

    def __init__(self, port: str, counters: dict[str, int], *, clock: Callable[[], float]) -> None:
        self.port = port
        self.context: dict[str, Any] = {}
        self._failures = 0
        self._counters = counters
        self._connect_log = RateLimitedLog(1, CONNECT_FAILED_LOG_EVERY_S, clock=clock)
        self._repeated = RateLimitedLog(1, REPEATED_LOG_EVERY_S, clock=clock)  # per event
        self._wire = WireErrorLog(
            burst=WIRE_LOG_BURST,
            window_s=WIRE_LOG_WINDOW_S,
            clock=clock,
            context=lambda: {"port": self.port, **self.context},
        )

    def _line(self, level: str, event: str, fields: dict[str, Any]) -> None:
        getattr(driver_log, level)(event, **{"port": self.port, **self.context, **fields})

    def info(self, event: str, **fields: Any) -> None:
        self._line("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._line("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._line("error", event, fields)

    def exception(self, event: str, **fields: Any) -> None:
        self._line("exception", event, fields)

    def connect_failed(self, error: str, retry_in_s: float) -> None:
        """The port cannot be opened: a warning per failing streak, then one a minute."""
        self._failures += 1
        if self._connect_log.admit() is not None:
            self.warning(
                "board.connect_failed", error=error, attempts=self._failures, retry_in_s=retry_in_s
            )

    def repeated(self, level: str, event: str, **fields: Any) -> bool:
        """A condition that recurs every heartbeat: logged once, then at most once a minute.

        The line after a quiet spell carries ``suppressed_before=N``. True when logged.
        """
        held = self._repeated.admit(event)
        if held is None:
            return False
        if held:
            fields["suppressed_before"] = held
        self._line(level, event, fields)
        return True

    def connected(self) -> None:
        self._failures = 0
        self._connect_log.forget()  # the next failure starts a streak: said at once

    def adopt_context(self) -> None:
        """Take the caller's (the daemon's) structlog context: its table and current round."""
        self.context = dict(structlog.contextvars.get_contextvars())

    def wire_error(self, kind: str, sample: bytes, **fields: Any) -> None:
        """A rejected chunk or frame (already counted by its own counter)."""
        logged = self._wire.report(kind, sample, **fields)
        self._counters["wire_errors_logged" if logged else "wire_errors_suppressed"] += 1

    def frame_error(self, kind: str, frame: p.Frame, **fields: Any) -> None:
        """A CRC-good frame refused by the protocol rules; the sample is its body."""
        body = p.encode_body(frame.type, frame.seq, frame.payload, frame.version)
        self.wire_error(kind, body, **fields)
