"""The meter requests: what the round asks of a meter book (data only).

Apart from :mod:`progressived.engine.meter_port` (the port) so that the round's state can
hold the requests it awaits, and the events (:mod:`progressived.engine.events`) can journal
one (``meter_requested``), without importing each other. ``MeterAward`` lives here too: a
reserved award is what a post or a void request names (the two-phase pattern's pending
account).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from progressived.engine.postings import Posting, Postings


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


# -- JSON (a deferred request is journaled in its ``meter_requested`` event) --------------


def _award_to_dict(award: MeterAward) -> dict[str, Any]:
    return {
        "seat": award.seat,
        "hand": award.hand,
        "meter": award.meter,
        "units": award.units,
        "meter_before": award.meter_before,
        "postings": [[p.account, p.units] for p in award.postings],
        "confirmed": award.confirmed,
        "share_of": award.share_of,
    }


def _award_from_dict(data: Mapping[str, Any]) -> MeterAward:
    return MeterAward(
        seat=int(data["seat"]),
        hand=str(data["hand"]),
        meter=str(data["meter"]),
        units=int(data["units"]),
        meter_before=int(data["meter_before"]),
        postings=tuple(Posting(str(a), int(u)) for a, u in data["postings"]),
        confirmed=bool(data["confirmed"]),
        share_of=int(data["share_of"]),
    )


def request_to_dict(request: MeterRequest) -> dict[str, Any]:
    """A JSON-ready dict of a meter request (``type`` plus its fields)."""
    match request:
        case Contribute():
            return {
                "type": "contribute",
                "round": request.round,
                "seat": request.seat,
                "units": request.units,
                "count": request.count,
            }
        case ReserveAwards():
            return {
                "type": "reserve",
                "round": request.round,
                "first_order": request.first_order,
                "claims": [[c.seat, c.hand, c.meter] for c in request.claims],
            }
        case PostAward():
            return {
                "type": "post",
                "round": request.round,
                "by": request.by,
                "award": _award_to_dict(request.award),
            }
        case VoidAward():
            return {
                "type": "void",
                "round": request.round,
                "reason": request.reason,
                "award": _award_to_dict(request.award),
            }
        case RefundContribution():
            return {
                "type": "refund",
                "round": request.round,
                "seat": request.seat,
                "units": request.units,
                "receipt": [[p.account, p.units] for p in request.receipt],
            }


def request_from_dict(data: Mapping[str, Any]) -> MeterRequest:
    """The request written by :func:`request_to_dict`."""
    round_no = int(data["round"])
    match data["type"]:
        case "contribute":
            return Contribute(
                round=round_no,
                seat=int(data["seat"]),
                units=int(data["units"]),
                count=int(data["count"]),
            )
        case "reserve":
            claims = tuple(Claim(int(s), str(h), str(m)) for s, h, m in data["claims"])
            return ReserveAwards(
                round=round_no, claims=claims, first_order=int(data["first_order"])
            )
        case "post":
            return PostAward(
                round=round_no, award=_award_from_dict(data["award"]), by=str(data["by"])
            )
        case "void":
            return VoidAward(
                round=round_no, award=_award_from_dict(data["award"]), reason=str(data["reason"])
            )
        case "refund":
            receipt = tuple(Posting(str(a), int(u)) for a, u in data["receipt"])
            return RefundContribution(
                round=round_no, seat=int(data["seat"]), units=int(data["units"]), receipt=receipt
            )
    raise ValueError(f"unknown meter request type {data['type']!r}")
