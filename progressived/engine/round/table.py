"""The round's table rules: sensors, LOCK, same-player spots, closing the progressive."""

from __future__ import annotations

from progressived.core.params import TableParams
from progressived.engine.commands import Lock, SamePlayer, Sensors, SetClosed
from progressived.engine.decision import RejectCode, Rejected
from progressived.engine.events import (
    LateBet,
    RoundLocked,
    SensorsChanged,
    SpotsJoined,
    TableClosed,
    TableOpened,
)
from progressived.engine.meter_port import Contribute
from progressived.engine.round.plan import Plan, Step, seat_error
from progressived.engine.state import Phase, TableState, link_closures


def sensors(params: TableParams, state: TableState, cmd: Sensors) -> Rejected | Plan:
    for seat in sorted(cmd.present, key=str):
        if error := seat_error(params, seat, state):
            return error
    present = frozenset(cmd.present)
    if present == state.sensed:
        return ()
    changed = SensorsChanged(at=cmd.at, round=state.round, present=tuple(sorted(present)))
    if state.phase is Phase.OPEN:
        return (changed,)
    # After LOCK the dealer takes the locked wagers off the sensors: expected. Anything
    # else (a bet placed late, a late bet withdrawn) is reported and changes nothing.
    late = tuple(
        LateBet(at=cmd.at, round=state.round, seat=s, present=s in present)
        for s in sorted(present ^ state.sensed)
        if s in present or s not in state.locked
    )
    return (*late, changed)


def lock(params: TableParams, state: TableState, cmd: Lock) -> Rejected | Plan:
    """LOCK: the round locks the sensed seats and asks the meter book for their contributions."""
    if state.phase is not Phase.OPEN:
        return Rejected(f"round {state.round} is already locked", RejectCode.ALREADY_LOCKED, state)
    # The link down or refusing closes the linked meters only: LOCK still locks the local ones.
    local_meters = len(params.linked_meters) < len(params.meters)
    closing = state.closed - link_closures(state.closed) if local_meters else state.closed
    if closing:
        why = ", ".join(sorted(closing))
        return Rejected(
            f"the progressive is closed ({why}): LOCK refused", RejectCode.CLOSED, state
        )
    seats = sorted(state.sensed)
    steps: list[Step] = [RoundLocked(at=cmd.at, round=state.round, seats=tuple(seats))]
    steps += [Contribute(round=state.round, seat=seat, units=params.wager_units) for seat in seats]
    return tuple(steps)


def same_player(params: TableParams, state: TableState, cmd: SamePlayer) -> Rejected | Plan:
    for seat in sorted(cmd.seats, key=str):
        if error := seat_error(params, seat, state):
            return error
    if len(cmd.seats) < 2:
        return Rejected("SAME-PLAYER needs two different seats", RejectCode.BAD_SEAT, state)
    group = frozenset(cmd.seats)
    for existing in state.same_player:
        if existing & group:
            group |= existing
    if any(group == g for g in state.same_player):
        return ()
    most = params.paytable.max_hands_per_player
    if most is not None and len(group) > most:
        seats = ", ".join(str(s) for s in sorted(group))
        return Rejected(
            f"one player may play at most {most} hands ({params.paytable.hands_per_player_rule}); "
            f"seats {seats} would be one player",
            RejectCode.TOO_MANY_HANDS,
            state,
        )
    return (SpotsJoined(at=cmd.at, round=state.round, seats=tuple(sorted(group))),)


def set_closed(state: TableState, cmd: SetClosed) -> Rejected | Plan:
    reason = cmd.reason.strip()
    if not reason:
        return Rejected(
            "a reason is needed to close or open the progressive", RejectCode.NO_REASON, state
        )
    if cmd.closed:
        if reason in state.closed:
            return ()
        return (TableClosed(at=cmd.at, round=state.round, reason=reason),)
    if reason not in state.closed:
        return ()
    return (TableOpened(at=cmd.at, round=state.round, reason=reason),)
