"""What the watchdog, ``status`` and the metrics look at, and the one rule for "healthy"."""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field

from progressived.config.daemon import WatchdogSection
from progressived.daemon.link_refusal import refused_code


@dataclass
class Health:
    """Liveness facts, each written by the part that knows it."""

    board_online: bool = False
    broker_connected: bool = False
    ledger_ok: bool = True
    loop_beat: float = field(default_factory=time.monotonic)
    board_offline_since: float = field(default_factory=time.monotonic)
    last_error: str = ""


def check_health(health: Health, wd: WatchdogSection) -> tuple[bool, str]:
    """Healthy = ledger writable, event loop turning, board online (after a grace)."""
    now = time.monotonic()
    if not health.ledger_ok:
        return False, f"ledger unavailable: {health.last_error}"
    if now - health.loop_beat > wd.loop_stall_s:
        return False, f"event loop stalled for {now - health.loop_beat:.1f}s"
    offline_for = now - health.board_offline_since
    if not health.board_online and offline_for > wd.board_offline_grace_s:
        return False, f"board offline for {offline_for:.0f}s"
    return True, "ok"


def degraded(closed: Collection[str]) -> str:
    """What keeps part of the progressive closed that no restart cures ("" when nothing).

    A link refusal (docs/link.md, "Refusal codes") is not a reason to stop the watchdog:
    a restart would close the local meters too and change nothing at the link. It needs
    the configuration fixed and an operator, so ``status`` says it in place of "ok".
    """
    code = refused_code(frozenset(closed))
    if code is None:
        return ""
    return (
        f"degraded: the linked progressive is closed, the link refused this table ({code}); "
        "fix the configuration, then progressivectl open"
    )
