"""The meter requests: what the round asks of a meter book (data only).

Apart from :mod:`progressived.engine.meter_port` (the port and its deferred-answer events)
so that the round's state can hold the requests it awaits without the two modules
importing each other. ``MeterAward`` lives here too: a reserved award is what a post or a
void request names (the two-phase pattern's pending account).
"""

from __future__ import annotations

from dataclasses import dataclass

from progressived.engine.events import Postings


@dataclass(frozen=True, slots=True)
class MeterAward:
    """A meter award in the round's recorded order, with the postings that keyed it."""

    seat: int
    hand: str
    meter: str
    units: int
    meter_before: int
    postings: Postings
    confirmed: bool = False
    share_of: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Contribute:
    """Post the contributions of ``count`` wagers locked at ``seat`` (id ``round:seat``)."""

    round: int  # the round the request belongs to (part of its id)

    seat: int
    units: int
    count: int = 1

    @property
    def contribution_id(self) -> str:
        return f"{self.round}:{self.seat}"


@dataclass(frozen=True, slots=True)
class Claim:
    """A meter hand keyed at a seat: with the request's round, its id is ``round:seat:hand``."""

    seat: int
    hand: str
    meter: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReserveAwards:
    """Price and reserve a group of claims on the meter as it stands (one claim, or a split
    group sharing what one claim would receive). ``first_order`` is the first claim's place
    in the round's recorded order."""

    round: int  # the round the request belongs to (part of its id)

    claims: tuple[Claim, ...]
    first_order: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PostAward:
    """Pay a reserved award (pending -> paid by an attendant), confirmed by ``by``."""

    round: int  # the round the request belongs to (part of its id)

    award: MeterAward
    by: str


@dataclass(frozen=True, slots=True, kw_only=True)
class VoidAward:
    """Reverse a reserved award exactly (``reason``: unkeyed, rejected, repriced, voided)."""

    round: int  # the round the request belongs to (part of its id)

    award: MeterAward
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RefundContribution:
    """VOID: reverse the contribution the book recorded for ``seat`` (its receipt)."""

    round: int  # the round the request belongs to (part of its id)

    seat: int
    units: int
    receipt: Postings


MeterRequest = Contribute | ReserveAwards | PostAward | VoidAward | RefundContribution
