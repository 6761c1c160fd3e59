"""What the watchdog, ``status`` and the metrics look at, and the rules for "healthy".

Three states (docs/operations.md, "Health"), because a restart cures some faults and not
others:

* **failed** -- :func:`check_health`, the watchdog's rule: the ledger, the event loop, the
  board. While it fails the daemon stops pinging systemd, which restarts it.
* **degraded** -- the watchdog's rule holds, but the table is not doing its whole job and a
  restart would not help (so the watchdog goes on pinging): the broker refuses the table's
  login or publishes, or is unreachable (the signs show nothing new); the linked
  progressive is closed (``link-down``, a link refusal); the ledger's file was deleted or
  replaced under the running daemon (a restart would drop the only copy of its rows).
* **ok** -- neither.

:func:`assess` is what ``status``, ``progressive_healthy`` and the unit's status line say:
healthy only when ok.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from progressived.config.daemon import WatchdogSection
from progressived.daemon.link_refusal import refused_code
from progressived.daemon.refusal_advice import advice
from progressived.engine.state import LINK_DOWN
from progressived.mqtt.session import MqttSession, SessionState


class BrokerView(Protocol):
    """The table's MQTT session as health reads it (live: :class:`~progressived.mqtt.
    session.MqttSession`)."""

    @property
    def connected(self) -> bool: ...

    @property
    def state(self) -> SessionState: ...

    @property
    def detail(self) -> str: ...

    @property
    def denied(self) -> Mapping[str, str]: ...

    @property
    def denied_total(self) -> int: ...


DEGRADED = "degraded: "  # how a degraded table's reason begins (a failed one's does not)


@dataclass
class Health:
    """Liveness facts, each written by the part that knows it (the broker's: its session)."""

    board_online: bool = False
    ledger_ok: bool = True
    loop_beat: float = field(default_factory=time.monotonic)
    board_offline_since: float = field(default_factory=time.monotonic)
    last_error: str = ""
    broker: BrokerView | None = None
    # Why the ledger's path no longer names the open file ("" while it does): the progressive
    # is closed (``ledger_ok`` False) and stays so; no retry, no checkpoint (upkeep).
    ledger_file: str = ""
    # When (UTC) the broker was lost, or the first attempt failed; "" while connected.
    broker_down_since: str = ""
    # Why the table's archive is too far behind, or refuses its rows ("" when it is not;
    # progressived.archive.feed): degraded, never failed -- play goes on.
    archive: str = ""

    @property
    def broker_connected(self) -> bool:
        return self.broker is not None and self.broker.connected


def check_health(health: Health, wd: WatchdogSection) -> tuple[bool, str]:
    """Healthy for the watchdog = ledger writable, event loop turning, board online (after a
    grace)."""
    now = time.monotonic()
    if not health.ledger_ok and not health.ledger_file:
        # A ledger file deleted or replaced is degraded, not failed: a restart would close
        # the only copy of its rows (and a deleted one stops the start with exit 3).
        return False, f"ledger unavailable: {health.last_error}"
    if now - health.loop_beat > wd.loop_stall_s:
        return False, f"event loop stalled for {now - health.loop_beat:.1f}s"
    offline_for = now - health.board_offline_since
    if not health.board_online and offline_for > wd.board_offline_grace_s:
        return False, f"board offline for {offline_for:.0f}s"
    return True, "ok"


def linked_closure(closed: Collection[str]) -> str:
    """Why the linked progressive is closed at this table ("" when it is not), and what to do."""
    code = refused_code(frozenset(closed))
    if code is not None:
        why = f"the link refused this table ({code})"
        return f"the linked progressive is closed, {why}; {advice(code)}"
    if LINK_DOWN in closed:
        return (
            "the linked progressive is closed (link-down: the link's heartbeats stopped; "
            "nothing contributes to the linked meters and their signs show CLOSED)"
        )
    return ""


def assess(health: Health, wd: WatchdogSection, closed: Collection[str] = ()) -> tuple[bool, str]:
    """Healthy as ``status``, the metrics and the unit's status line say it: the watchdog's
    rule (failed), then what degrades the table, each with what to do, or ``ok``."""
    ok, why = check_health(health, wd)
    if not ok:
        return ok, why
    reasons: list[str] = []
    if health.ledger_file:
        reasons.append(health.last_error or health.ledger_file)  # with what to do
    broker = health.broker
    if broker is not None:
        if broker.state is SessionState.NOT_AUTHORISED:
            reasons.append(f"broker refused the login: {broker.detail}")
        elif broker.denied:
            denied = broker.denied
            topic = min(denied)
            more = f" and {len(denied) - 1} more topic(s)" if len(denied) > 1 else ""
            reasons.append(f"broker refused publishing on {topic}{more}: {denied[topic]}")
        elif not broker.connected and health.broker_down_since:
            detail = f" ({broker.detail})" if broker.detail else ""
            reasons.append(
                f"broker unreachable since {health.broker_down_since}{detail}: the signs show "
                "nothing new; events wait in the ledger's outbox"
            )
    if linked := linked_closure(closed):
        reasons.append(linked)
    if health.archive:
        reasons.append(health.archive)
    if not reasons:
        return True, "ok"
    return False, DEGRADED + "; ".join(reasons)


def unit_status(ok: bool, why: str, healthy: str = "healthy") -> str:
    """The unit's status line (``systemctl status``) for an assessment: ``healthy``, the
    degraded reason as it stands, or ``unhealthy: WHY`` when the watchdog's rule fails."""
    if ok:
        return healthy
    return why if why.startswith(DEGRADED) else f"unhealthy: {why}"


class BrokerDownSince:
    """A session observer that notes when (UTC) the broker was lost, for :func:`assess`."""

    def __init__(self, health: Health, clock: Callable[[], str]) -> None:
        self.health = health
        self.clock = clock

    def connected(self, session: MqttSession) -> None:
        self.health.broker_down_since = ""

    def disconnected(self, session: MqttSession, retry_in_s: float | None) -> None:
        if not self.health.broker_down_since:
            self.health.broker_down_since = self.clock()

    def denied(self, session: MqttSession, topic: str, reason: str, first: bool) -> None:
        """Refusals are read from the session itself."""

    def accepted(self, session: MqttSession, topic: str) -> None:
        """Likewise."""

    def downgraded(self, session: MqttSession) -> None:
        """Not a fault."""
