"""The round: one table's state machine, from sensors to RECONCILE or VOID.

Sensors, LOCK, keying winners, the supervisor (CONFIRM, REJECT, split approval),
same-player spots, envy, RECONCILE, VOID and closing the progressive. The round never
touches a meter account: where money moves on a meter it plans a meter request (see
:mod:`progressived.engine.meter_port`) and the facade hands it to the meter port.

* :mod:`.table` -- sensors, LOCK, same player, close/open.
* :mod:`.keying` -- keying hands, the supervisor, the claim order and repricing.
* :mod:`.settle` -- RECONCILE and VOID.
"""

from __future__ import annotations

from progressived.core.params import TableParams
from progressived.engine.commands import (
    Confirm,
    KeyHand,
    Lock,
    Reconcile,
    Reject,
    SamePlayer,
    Sensors,
    SetClosed,
    Void,
)
from progressived.engine.decision import Rejected
from progressived.engine.round.keying import confirm, key, reject
from progressived.engine.round.plan import Plan, Step, seat_problem
from progressived.engine.round.settle import reconcile, void
from progressived.engine.round.table import lock, same_player, sensors, set_closed
from progressived.engine.state import TableState

RoundCommand = (
    Sensors | Lock | KeyHand | Confirm | Reject | SamePlayer | Reconcile | Void | SetClosed
)

__all__ = ["Plan", "RoundCommand", "Step", "plan", "seat_problem"]


def plan(params: TableParams, state: TableState, command: RoundCommand) -> Rejected | Plan:
    """The round's answer to ``command``: its plan (events and meter requests) or a refusal."""
    match command:
        case Sensors():
            return sensors(params, state, command)
        case Lock():
            return lock(params, state, command)
        case KeyHand():
            return key(params, state, command)
        case Confirm():
            return confirm(params, state, command)
        case Reject():
            return reject(params, state, command)
        case SamePlayer():
            return same_player(params, state, command)
        case Reconcile():
            return reconcile(params, state, command)
        case Void():
            return void(params, state, command)
        case SetClosed():
            return set_closed(state, command)
