"""The link controller's refusal log: :class:`progressived.runtime.ratelimit.RateLimitedLog`
on the link's logger (a flood of refused messages from a misconfigured or hostile table
must not flood the log)."""

from __future__ import annotations

import structlog

from progressived.runtime.ratelimit import RateLimitedLog as SharedRateLimitedLog

log = structlog.get_logger("progressived.link")


class RateLimitedLog(SharedRateLimitedLog):
    """At most ``burst`` warnings per ``window_s`` on the ``progressived.link`` logger."""

    def __init__(self, burst: int = 10, window_s: float = 60.0) -> None:
        super().__init__(burst, window_s, logger=log)
