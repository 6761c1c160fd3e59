"""Documented corrections of the meters: adjustments and transfers, under two-person control.

They are refused while a round is open or an award on the meter awaits the supervisor; the
round tells the book so through a :class:`RoundView` (the book reads no round state).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from progressived.core.params import TableParams
from progressived.engine import accounts
from progressived.engine.commands import AdjustMeter, TransferMeter
from progressived.engine.decision import RejectCode
from progressived.engine.events import MeterAdjusted, MeterTransferred, Posting

Refusal = tuple[str, RejectCode]  # (reason, code)


@dataclass(frozen=True, slots=True)
class RoundView:
    """What the meter book must know of the round before an operator correction."""

    round: int
    round_open: bool  # a round is locked and not yet reconciled or voided
    meters_pending: frozenset[str]  # meters with an award awaiting the supervisor


def _operator_error(
    params: TableParams,
    view: RoundView,
    reason: str,
    actor: str,
    approved_by: str,
    meters: list[str],
) -> Refusal | None:
    for meter_id in meters:
        if meter_id not in params.meter_ids:
            return (
                f"no meter {meter_id!r} (meters: {', '.join(params.meter_ids)})",
                RejectCode.BAD_METER,
            )
    if not reason.strip():
        return ("a written reason is required", RejectCode.NO_REASON)
    if not actor.strip() or actor in ("dealer", "system"):
        return ("the operator's id is required", RejectCode.NO_OPERATOR)
    if not approved_by.strip() or approved_by == actor:
        return ("a second person must approve (two-person control)", RejectCode.NO_APPROVAL)
    if view.round_open:
        return ("refused while a round is open: reconcile or void it first", RejectCode.ROUND_OPEN)
    if any(m in view.meters_pending for m in meters):
        return ("refused while an award awaits the supervisor", RejectCode.AWARD_PENDING)
    return None


def adjust(
    params: TableParams, balances: Mapping[str, int], view: RoundView, cmd: AdjustMeter
) -> Refusal | MeterAdjusted:
    """A signed correction of one meter, funded from (or returned to) its adjustments account."""
    if error := _operator_error(params, view, cmd.reason, cmd.actor, cmd.approved_by, [cmd.meter]):
        return error
    if isinstance(cmd.units, bool) or not isinstance(cmd.units, int) or cmd.units == 0:
        return ("an adjustment needs a non-zero amount", RejectCode.BAD_AMOUNT)
    before = balances.get(accounts.meter(cmd.meter), 0)
    if before + cmd.units < 0:
        return ("the adjustment would make the meter negative", RejectCode.BAD_AMOUNT)
    return MeterAdjusted(
        at=cmd.at,
        round=view.round,
        meter=cmd.meter,
        units=cmd.units,
        meter_before=before,
        reason=cmd.reason,
        operator=cmd.actor,
        approved_by=cmd.approved_by,
        postings=(
            Posting(accounts.adjustments(cmd.meter), -cmd.units),
            Posting(accounts.meter(cmd.meter), cmd.units),
        ),
    )


def transfer(
    params: TableParams, balances: Mapping[str, int], view: RoundView, cmd: TransferMeter
) -> Refusal | MeterTransferred:
    """Move the part of one meter above its reset value to another meter."""
    meters = [cmd.from_meter, cmd.to_meter]
    if error := _operator_error(params, view, cmd.reason, cmd.actor, cmd.approved_by, meters):
        return error
    if cmd.from_meter == cmd.to_meter:
        return ("a transfer needs two different meters", RejectCode.BAD_METER)
    if isinstance(cmd.units, bool) or not isinstance(cmd.units, int) or cmd.units <= 0:
        return ("a transfer needs a positive amount", RejectCode.BAD_AMOUNT)
    above_reset = balances.get(accounts.meter(cmd.from_meter), 0) - params.reset_seed(
        cmd.from_meter
    )
    if cmd.units > above_reset:
        return (
            "only the amount above the reset value may be transferred "
            f"(at most {max(0, above_reset)} units)",
            RejectCode.BAD_AMOUNT,
        )
    return MeterTransferred(
        at=cmd.at,
        round=view.round,
        from_meter=cmd.from_meter,
        to_meter=cmd.to_meter,
        units=cmd.units,
        reason=cmd.reason,
        operator=cmd.actor,
        approved_by=cmd.approved_by,
        postings=(
            Posting(accounts.meter(cmd.from_meter), -cmd.units),
            Posting(accounts.meter(cmd.to_meter), cmd.units),
        ),
    )
