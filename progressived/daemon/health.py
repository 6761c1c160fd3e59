"""What the watchdog, ``status`` and the metrics look at, and the rules for "healthy".

Two rules, because a restart cures some faults and not others:

* :func:`check_health` is the watchdog's: the ledger, the event loop, the board. While it
  fails the daemon stops pinging systemd, which restarts it.
* :func:`assess` is what ``status`` and ``progressive_healthy`` say: the watchdog's rule,
  and the broker's verdict on who the table is — a refused login or refused publishes
  (the ACL) leave the signs without the table's news until someone fixes the account or
  the ACL, so the table is unhealthy; but restarting would not help, so the watchdog goes
  on pinging. A broker that is merely unreachable is neither (``broker_connected``).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from progressived.config.daemon import WatchdogSection
from progressived.daemon.link_refusal import refused_code


class BrokerView(Protocol):
    """The table's MQTT session as health reads it (live: :class:`~progressived.mqtt.
    session.MqttSession`)."""

    @property
    def connected(self) -> bool: ...

    @property
    def state(self) -> str: ...

    @property
    def detail(self) -> str: ...

    @property
    def denied(self) -> Mapping[str, str]: ...

    @property
    def denied_total(self) -> int: ...


@dataclass
class Health:
    """Liveness facts, each written by the part that knows it (the broker's: its session)."""

    board_online: bool = False
    ledger_ok: bool = True
    loop_beat: float = field(default_factory=time.monotonic)
    board_offline_since: float = field(default_factory=time.monotonic)
    last_error: str = ""
    broker: BrokerView | None = None

    @property
    def broker_connected(self) -> bool:
        return self.broker is not None and self.broker.connected


def check_health(health: Health, wd: WatchdogSection) -> tuple[bool, str]:
    """Healthy for the watchdog = ledger writable, event loop turning, board online (after a
    grace)."""
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


def assess(health: Health, wd: WatchdogSection) -> tuple[bool, str]:
    """Healthy as ``status`` and the metrics say it: the watchdog's rule, then the broker's
    refusals of this table's account (a refused login, refused publishes)."""
    ok, why = check_health(health, wd)
    broker = health.broker
    if not ok or broker is None:
        return ok, why
    if broker.state == "not authorised":
        return False, f"broker refused the login: {broker.detail}"
    denied = broker.denied
    if denied:
        topic = min(denied)
        more = f" and {len(denied) - 1} more topic(s)" if len(denied) > 1 else ""
        return False, f"broker refused publishing on {topic}{more}: {denied[topic]}"
    return True, "ok"
