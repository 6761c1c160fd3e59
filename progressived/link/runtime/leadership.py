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
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from progressived.storage.errors import LeaseHeld
from progressived.storage.port import Lease

ACTIVE, STANDBY = "active", "standby"
POLL_FRACTION = 4  # a standby reads the lease every lease_s / 4 (sooner if it lapses sooner)
MAX_POLL_S = 1.0  # ... and at least every second (the systemd watchdog is pinged as it polls)
MIN_POLL_S = 0.05


def iso(epoch_s: float) -> str:
    """Seconds since the epoch as the status shows times (UTC, milliseconds)."""
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds")


def lease_of(journal: object) -> Lease | None:
    """The lease a ledger was opened under (a database's), or None (a file, a stand-in)."""
    lease = getattr(journal, "lease", None)
    return lease if isinstance(lease, Lease) else None


class Leadership:
    """This controller's role, since when, and the lease as last seen.

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
        self.role = STANDBY
        self.since = wall()
        self.changes = 0  # role changes so far (each takeover or stand-down)
        self.holder = ""  # the lease's holder as last seen ("" : free, or never read)
        self.token = 0
        self.expires_at: float | None = None  # by the database's clock, seconds since epoch
        self._deadline = -math.inf  # monotonic: this controller's own end of its term

    # ------------------------------------------------------------------ changes
    def _become(self, role: str) -> None:
        if role != self.role:
            self.role, self.since = role, self._wall()
            self.changes += 1

    def activated(self, lease: Lease | None, started: float) -> None:
        """This controller took the lease (``None``: a file, no lease); ``started``: the
        monotonic time just before the acquire was sent."""
        self._become(ACTIVE)
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

    def waiting(self, held: LeaseHeld | None) -> None:
        """Standby: another holder's lease is valid (``held``), or the lease could not be
        read (``None``: the database is unreachable; the last sight stays)."""
        self._become(STANDBY)
        self._deadline = -math.inf
        if held is not None:
            self.holder, self.token = held.holder, held.token
            self.expires_at = self._wall() + held.expires_in_s

    def stood_down(self) -> None:
        """This controller lost the lease (fenced, or its term passed unrenewed)."""
        self._become(STANDBY)
        self._deadline = -math.inf

    # ------------------------------------------------------------------ questions
    def holds(self) -> bool:
        """Whether this controller may still act as the link's: active, within its term."""
        return self.role == ACTIVE and self._monotonic() < self._deadline

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

    def view(self) -> dict[str, Any]:
        """The status's ``role`` and ``lease`` (docs/link.md)."""
        return {
            "role": self.role,
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
