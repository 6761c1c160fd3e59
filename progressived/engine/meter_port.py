"""The meter port: what the round asks of a meter book, and how the answers come back.

The round never touches meter accounts. Where today's rules move money on a meter it
emits a *meter request* instead -- contribute a seat's wager, reserve an award (a claim,
alone or as a split group), post it (pay it), void it (reverse the reservation), refund a
contribution -- and the meter book answers each with the events that record the result
(``WagerLocked``, ``AwardKeyed``, ``AwardConfirmed``, ``AwardReversed``,
``WagerRefunded``), postings included.

Two-phase award: a reserved award already sits in an account (``award_pending:<meter>``)
until it is posted (paid) or voided (reversed).

A :class:`MeterPort` answers a request at once (the local meter book: same process, same
ledger transaction) or later (``None``: the round records a :class:`MeterRequested` and
waits; the answer arrives as a :class:`MeterAnswered` command). Waiting is a normal state
of the round (``TableState.awaiting``): a claim keyed but not yet priced is not payable,
RECONCILE, CONFIRM, REJECT, VOID and keying a meter hand refuse while the meter has not
answered. A deferred adapter's events (``meter_requested``) are journaled like any other,
so a table stopped while it waits finds the request again (the linked meter, docs/link.md).
A deferred meter may refuse a claim or a confirmation (``claim_refused``): the request is
answered and the claim leaves the round (see docs/link.md, "A refused claim").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from progressived.engine.events import ClaimRefused, Event, MeterRequested
from progressived.engine.meter_requests import (
    Claim,
    Contribute,
    MeterAward,
    MeterRequest,
    PostAward,
    RefundContribution,
    ReserveAwards,
    VoidAward,
)

if TYPE_CHECKING:
    from progressived.core.params import TableParams
    from progressived.engine.state import TableState

__all__ = [
    "Claim",
    "ClaimRefused",
    "Contribute",
    "MeterAnswered",
    "MeterAward",
    "MeterPort",
    "MeterRequest",
    "MeterRequested",
    "PostAward",
    "RefundContribution",
    "ReserveAwards",
    "VoidAward",
]

# ``MeterRequested`` and ``ClaimRefused`` are events like any other: they are defined, and
# known by kind, in progressived/engine/events.py; they are named here with the port.


@dataclass(frozen=True, slots=True, kw_only=True)
class MeterAnswered:
    """The meter book's late answer: the result events of requests the round awaits."""

    events: tuple[Event, ...]
    at: str = ""
    actor: str = "meter"


class MeterPort(Protocol):
    """Where the round's meter requests go.

    ``answer`` returns the events recording the result (the local book, decided now, on the
    state as it stands after the events before it) or ``None`` when the answer comes later.
    """

    def answer(
        self, params: TableParams, state: TableState, request: MeterRequest, at: str
    ) -> tuple[Event, ...] | None: ...
