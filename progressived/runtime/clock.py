"""The daemon's clock: UTC ISO-8601 timestamps handed to the engine with each command.

:class:`JournalClock` is the one place a journal row's time is fixed. Rows get their
``seq`` in the order they reach the ledger's single writer thread; a time taken earlier
(when a board frame arrived, say) and journaled after another row would run backwards
against ``seq``. So every write is stamped as it is handed to that thread, in that same
order, and never earlier than the write before it: ``ts`` is non-decreasing with ``seq``,
even if the wall clock steps back.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _instant(at: str) -> datetime:
    moment = datetime.fromisoformat(at)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class JournalClock:
    """Timestamps that never go backwards, in the order they are asked for."""

    def __init__(self, now: Callable[[], str] = utc_now) -> None:
        self._now = now
        self._last = ""
        self._last_instant: datetime | None = None

    def stamp(self, at: str = "") -> str:
        """``at`` (or now), or the previous stamp if ``at`` is earlier than it."""
        at = at or self._now()
        instant = _instant(at)
        if self._last_instant is not None and instant < self._last_instant:
            return self._last
        self._last, self._last_instant = at, instant
        return at
