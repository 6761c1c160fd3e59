"""Which link controller serves the link: the lease as this process sees it (docs/link.md,
"The standby controller and two brokers").

Several ``progressived link`` processes may share one link ledger in a database; the one
that holds the ledger's lease is **active** (it connects to the brokers and answers the
tables), the others are **standby** (connected to nothing but the database, they look at
the lease every :data:`POLL_FRACTION`-th of ``lease_s`` and take it once it lapses).

The database's fence (:mod:`progressived.storage.postgres`) is what makes a stale writer
harmless: no write of an old holder commits after a new one acquired. This module adds the
other half, for what the database cannot see -- the broker. An active controller counts its
lease from *before* each renewal or commit that extended it, on its own monotonic clock
(:meth:`Leadership.extended`), so its own reckoning of the term never outlasts the
database's; once that term has passed without a renewal (it was paused, cut off, or the
database is unreachable) :meth:`Leadership.holds` is false, and the controller publishes
nothing and opens no broker connection: a controller woken from a pause longer than its
lease sends not even a heartbeat before it stands down.

What this process knows of the lease is one :class:`LeaseState` at a time; the role the
status and the metrics show (:class:`Role`) follows from it. A state is news once: the log
says that the database is out of reach, or that a renewal failed, when the state is
entered, not again while it lasts (:meth:`Leadership.unreachable` and
:meth:`Leadership.unrenewed` return whether it is news).
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, assert_never

from progressived.storage.errors import LeaseHeld
from progressived.storage.port import Lease

POLL_FRACTION = 4  # a standby reads the lease every lease_s / 4 (sooner if it lapses sooner)
MAX_POLL_S = 1.0  # ... and at least every second (the systemd watchdog is pinged as it polls)
MIN_POLL_S = 0.05


class Role(enum.StrEnum):
    """Which part this controller plays (the status's ``role``, the metrics' label)."""

    ACTIVE = "active"  # it holds the lease: connected to the brokers, it answers the tables
    STANDBY = "standby"  # it does not: connected to nothing but the database, it waits


class LeaseState(enum.Enum):
    """The lease as this controller last knew it."""

    WAITING = "waiting"  # standby: another controller holds it (or it was not tried yet)
    UNREACHABLE = "unreachable"  # standby: the database could not be read
    HELD = "held"  # active: acquired, or the last renewal succeeded
    UNRENEWED = "unrenewed"  # active: the last renewal failed (the term still runs)
    LOST = "lost"  # fenced, or unrenewed for a whole term: this term is ending


def role_of(state: LeaseState) -> Role:
    """The role a lease state plays."""
    match state:
        case LeaseState.HELD | LeaseState.UNRENEWED:
            return Role.ACTIVE
        case LeaseState.WAITING | LeaseState.UNREACHABLE | LeaseState.LOST:
            return Role.STANDBY
        case _:
            assert_never(state)


def iso(epoch_s: float) -> str:
    """Seconds since the epoch as the status shows times (UTC, milliseconds)."""
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds")


def lease_of(journal: object) -> Lease | None:
    """The lease a ledger was opened under (a database's), or None (a file, a stand-in)."""
    lease = getattr(journal, "lease", None)
    return lease if isinstance(lease, Lease) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseView:
    """What the status and the metrics show of the lease: a copy, which the metrics thread
    reads while the event loop moves on (:meth:`Leadership.seen`)."""

    role: Role
    since: float  # seconds since the epoch
    changes: int  # role changes so far
    me: str | None
    holder: str
    token: int
    expires_at: float | None
    lease_s: float

    def view(self) -> dict[str, Any]:
        """The status's ``role``, ``role_since`` and ``lease`` (docs/link.md)."""
        return {
            "role": self.role.value,
            "role_since": iso(self.since),
            "lease": None
            if self.me is None
            else {
                "me": self.me,
                "holder": self.holder,
                "token": self.token,
                "expires_at": None if self.expires_at is None else iso(self.expires_at),
                "lease_s": self.lease_s,
            },
        }


class Leadership:
    """This controller's lease state, its role since when, and the lease as last seen.

    ``me`` is this controller's holder name (None: a ledger in a file, which takes no lease:
    the controller is active from the start and stays so).
    """

    def __init__(
        self,
        me: str | None,
        lease_s: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.me = me
        self.lease_s = lease_s
        self._monotonic, self._wall = monotonic, wall
        self.state = LeaseState.WAITING
        self.since = wall()
        self.changes = 0  # role changes so far (each takeover or stand-down)
        self.holder = ""  # the lease's holder as last seen ("" : free, or never read)
        self.token = 0
        self.expires_at: float | None = None  # by the database's clock, seconds since epoch
        self._deadline = -math.inf  # monotonic: this controller's own end of its term

    @property
    def role(self) -> Role:
        return role_of(self.state)

    # ------------------------------------------------------------------ changes
    def _become(self, state: LeaseState) -> None:
        if role_of(state) is not self.role:
            self.since = self._wall()
            self.changes += 1
        self.state = state

    def activated(self, lease: Lease | None, started: float) -> None:
        """This controller took the lease (``None``: a file, no lease); ``started``: the
        monotonic time just before the acquire was sent."""
        self._become(LeaseState.HELD)
        if lease is None:
            self._deadline = math.inf
            self.holder, self.token, self.expires_at = self.me or "", 0, None
            return
        self.holder, self.token, self.expires_at = lease.holder, lease.token, lease.expires_at
        self._deadline = started + lease.ttl_s

    def extended(self, started: float, lease: Lease | None = None) -> None:
        """A renewal or a commit extended the lease; ``started``: just before it was sent."""
        if self._deadline == math.inf:
            return
        self._deadline = max(self._deadline, started + self.lease_s)
        if lease is not None:
            self.expires_at = lease.expires_at
        else:
            self.expires_at = self._wall() + (self._deadline - self._monotonic())

    def renewed(self, started: float, lease: Lease | None) -> None:
        """A renewal succeeded (``started``: just before it was sent). A lease lost while
        the renewal was on its way stays lost."""
        if self.state is LeaseState.LOST:
            return
        self.state = LeaseState.HELD
        self.extended(started, lease)

    def unrenewed(self) -> bool:
        """A renewal failed (the database out of reach); True if that is news (the last
        one had succeeded)."""
        if self.state is not LeaseState.HELD:
            return False
        self.state = LeaseState.UNRENEWED
        return True

    def waiting(self, held: LeaseHeld) -> None:
        """Standby: another holder's lease is valid (``held``)."""
        self._become(LeaseState.WAITING)
        self._deadline = -math.inf
        self.holder, self.token = held.holder, held.token
        self.expires_at = self._wall() + held.expires_in_s

    def unreachable(self) -> bool:
        """Standby: the lease could not be read (the database is unreachable; the last
        sight stays). True if that is news."""
        news = self.state is not LeaseState.UNREACHABLE
        self._become(LeaseState.UNREACHABLE)
        self._deadline = -math.inf
        return news

    def stood_down(self) -> None:
        """This controller lost the lease (fenced, or its term passed unrenewed)."""
        self._become(LeaseState.LOST)
        self._deadline = -math.inf

    # ------------------------------------------------------------------ questions
    def lost(self) -> bool:
        """Whether this term's lease is lost (a core task ending now is the stand-down)."""
        return self.state is LeaseState.LOST

    def holds(self) -> bool:
        """Whether this controller may still act as the link's: active, within its term."""
        return self.role is Role.ACTIVE and self._monotonic() < self._deadline

    def term_left_s(self) -> float:
        return self._deadline - self._monotonic()

    def renew_every_s(self, heartbeat_s: float) -> float:
        """How often the active controller renews: thrice per term, at least per heartbeat."""
        return min(heartbeat_s, self.lease_s / 3)

    def poll_s(self, held: LeaseHeld | None) -> float:
        """How long a standby waits before reading the lease again."""
        poll = min(self.lease_s / POLL_FRACTION, MAX_POLL_S)
        if held is not None:
            poll = min(poll, held.expires_in_s + MIN_POLL_S)
        return max(MIN_POLL_S, poll)

    def seen(self) -> LeaseView:
        """The lease as last seen, copied for the status and the metrics."""
        return LeaseView(
            role=self.role,
            since=self.since,
            changes=self.changes,
            me=self.me,
            holder=self.holder,
            token=self.token,
            expires_at=self.expires_at,
            lease_s=self.lease_s,
        )
