"""The daemon's clock: UTC ISO-8601 timestamps handed to the engine with each command."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
