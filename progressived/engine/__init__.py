"""The pure round engine: commands in, events out. No I/O, no clock, no randomness.

``decide(params, state, command)`` returns either the events the command causes and the
state after them, or a rejection with a reason and the state unchanged. ``evolve`` folds one
event into a state, so a state is always the replay of its events: that is how the ledger
rebuilds a round in progress after a crash.

Two aggregates behind one facade: the round (:mod:`progressived.engine.round`, one table's
state machine) and the meter book (:mod:`progressived.engine.meterbook`, the meters'
money), joined by the meter port (:mod:`progressived.engine.meter_port`). The board's
lights are not engine vocabulary: see :mod:`progressived.board.lights`.
"""

from progressived.engine.commands import (
    AdjustMeter,
    Command,
    Confirm,
    KeyHand,
    LinkedWagers,
    Lock,
    Reconcile,
    Reject,
    SamePlayer,
    Sensors,
    SetClosed,
    TransferMeter,
    Void,
)
from progressived.engine.core import Accepted, Decision, Rejected, decide, evolve, initial_state
from progressived.engine.events import Event, Posting, event_from_dict, event_to_dict
from progressived.engine.meter_port import MeterAnswered, MeterPort, MeterRequest
from progressived.engine.meterbook import LOCAL_BOOK, LocalMeterBook
from progressived.engine.state import Phase, TableState

__all__ = [
    "LOCAL_BOOK",
    "Accepted",
    "AdjustMeter",
    "Command",
    "Confirm",
    "Decision",
    "Event",
    "KeyHand",
    "LinkedWagers",
    "LocalMeterBook",
    "Lock",
    "MeterAnswered",
    "MeterPort",
    "MeterRequest",
    "Phase",
    "Posting",
    "Reconcile",
    "Reject",
    "Rejected",
    "SamePlayer",
    "Sensors",
    "SetClosed",
    "TableState",
    "TransferMeter",
    "Void",
    "decide",
    "event_from_dict",
    "event_to_dict",
    "evolve",
    "initial_state",
]
