"""What a round rule returns: a plan of events and meter requests, in order, or a refusal.

The facade (:mod:`progressived.engine.core`) walks the plan: it folds each event into the
state and hands each meter request to the meter port, folding its answer (or, when the
meter answers later, a ``MeterRequested``) before the next step.
"""

from __future__ import annotations

from progressived.core.params import TableParams
from progressived.engine.decision import RejectCode, Rejected
from progressived.engine.events import Event
from progressived.engine.meter_port import MeterRequest
from progressived.engine.state import TableState

Step = Event | MeterRequest
Plan = tuple[Step, ...]


def seat_problem(params: TableParams, seat: object) -> str | None:
    """Why ``seat`` is not a seat of this table, or ``None`` (one wording for every input)."""
    if isinstance(seat, bool) or not isinstance(seat, int) or not 1 <= seat <= params.seats:
        return f"seat {seat} is not on this table (seats 1-{params.seats})"
    return None


def seat_error(params: TableParams, seat: int, state: TableState) -> Rejected | None:
    if problem := seat_problem(params, seat):
        return Rejected(problem, RejectCode.BAD_SEAT, state)
    return None


def supervisor_error(state: TableState, supervisor: bool, what: str) -> Rejected | None:
    if not supervisor:
        return Rejected(f"{what} needs the supervisor key", RejectCode.SUPERVISOR_REQUIRED, state)
    return None


def awaiting_error(state: TableState, what: str) -> Rejected | None:
    """Refuse a meter step while the meter book has not answered the round's requests."""
    if not state.awaiting:
        return None
    claims = state.claims_awaiting_meter
    if claims:
        seat, hand = claims[0]
        why = f"the {hand} claim at seat {seat} awaits the meter's price"
    else:
        why = "the meter has not acknowledged this round's requests yet"
    return Rejected(f"{what} refused: {why}", RejectCode.METER_PENDING, state)
