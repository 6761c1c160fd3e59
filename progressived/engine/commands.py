"""Commands the table gives the engine. Time and identity come in with them.

``at`` is an ISO-8601 UTC timestamp supplied by the adapter (the engine never reads a
clock); ``actor`` says who acted (``dealer``, ``supervisor``, an operator id).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class _Base:
    at: str = ""
    actor: str = "dealer"


@dataclass(frozen=True, slots=True, kw_only=True)
class Sensors(_Base):
    """The board's full report of which seats' sensors hold a progressive wager."""

    present: frozenset[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Lock(_Base):
    """LOCK: lock in the wagers on the sensors and post their contributions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyHand(_Base):
    """The dealer keys a winning hand at a seat; keying it again turns it off."""

    seat: int
    hand: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Confirm(_Base):
    """The supervisor confirms the first meter award awaiting confirmation."""

    supervisor: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Reject(_Base):
    """The supervisor rejects the first meter award awaiting confirmation."""

    supervisor: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class SamePlayer(_Base):
    """The dealer marks spots as played by one player for this round (no envy between them)."""

    seats: frozenset[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconcile(_Base):
    """RECONCILE: settle the round and reset for the next hand."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Void(_Base):
    """VOID (misdeal): cancel the unreconciled round; supervisor only."""

    supervisor: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class SetClosed(_Base):
    """Close or reopen the progressive for one reason (board offline, operator, self-check)."""

    reason: str
    closed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkedWagers(_Base):
    """Wagers locked at another table linked to this meter (a linked meter's controller).

    ``contribution_id`` is that table's idempotency key for the contribution.
    """

    source_table: str
    count: int
    contribution_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AdjustMeter(_Base):
    """A documented correction of a meter (a malfunction, bringing it to a posted maximum).

    ``units`` is signed; ``reason`` and ``actor`` (the operator) are mandatory and
    ``approved_by`` must be a second person (no single person changes the meter alone).
    """

    meter: str
    units: int
    reason: str
    approved_by: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferMeter(_Base):
    """Move the part of a meter above its reset value to another meter (a documented transfer)."""

    from_meter: str
    to_meter: str
    units: int
    reason: str
    approved_by: str


Command = (
    AdjustMeter
    | TransferMeter
    | LinkedWagers
    | Sensors
    | Lock
    | KeyHand
    | Confirm
    | Reject
    | SamePlayer
    | Reconcile
    | Void
    | SetClosed
)
