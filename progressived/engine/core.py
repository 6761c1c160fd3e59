"""decide / evolve: the engine's facade, composing the round with a meter port.

``decide`` validates a command against the state and the parameters and returns the
events it causes (``Accepted``) or a reason (``Rejected``, state unchanged). Round
commands go to the round (:mod:`progressived.engine.round`), whose plan's meter requests go
to the meter port -- by default the local meter book (:mod:`progressived.engine.meterbook`),
answered at once, so the events are exactly one engine's. Meter commands (linked wagers,
adjustments, transfers) go to the meter book. ``evolve`` folds one event into the state;
``decide`` builds its resulting state with ``evolve`` too, so a state is exactly the replay
of its events.

Micro-benchmark: ``python -m bench.engine_decide`` (``decide`` per linked contribution and
per table-round command, CPU time; docs/performance.md, "Micro-benchmarks").
"""

from __future__ import annotations

from collections.abc import Sequence

from progressived.core.params import TableParams
from progressived.engine import meterbook
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
from progressived.engine.decision import Accepted, Decision, RejectCode, Rejected
from progressived.engine.events import Event
from progressived.engine.evolve import evolve
from progressived.engine.meter_port import MeterAnswered, MeterPort, MeterRequested
from progressived.engine.round import Plan, RoundCommand, plan, seat_problem
from progressived.engine.state import Phase, TableState

__all__ = [
    "Accepted",
    "Decision",
    "Rejected",
    "decide",
    "evolve",
    "initial_state",
    "open_meters",
    "seat_problem",
]


def _accept(state: TableState, events: Sequence[Event]) -> Accepted:
    for event in events:
        state = evolve(state, event)
    return Accepted(tuple(events), state)


def open_meters(params: TableParams, state: TableState, at: str = "") -> Accepted:
    """Fund every configured meter not funded yet with its starting amount (seed funding).

    A new table opens all its meters; a ledger whose configuration gained a meter opens
    just that one.
    """
    return _accept(state, meterbook.open_meter_events(params, state.opened, state.round, at))


def initial_state(params: TableParams, at: str = "") -> Accepted:
    """A brand-new table: each meter funded with its starting amount (seed funding)."""
    return open_meters(params, TableState(), at)


def _run(params: TableParams, state: TableState, steps: Plan, port: MeterPort, at: str) -> Accepted:
    """Walk a round's plan: fold its events, hand its meter requests to the port."""
    events: list[Event] = []
    for step in steps:
        if isinstance(step, Event):
            answer: Sequence[Event] = (step,)
        else:
            answered = port.answer(params, state, step, at)
            answer = (
                answered
                if answered is not None
                else (MeterRequested(at=at, round=state.round, request=step),)
            )
        for event in answer:
            state = evolve(state, event)
            events.append(event)
    return Accepted(tuple(events), state)


def _answered(state: TableState, command: MeterAnswered) -> Decision:
    """A deferred meter's answer: accepted only when every event answers an awaited request."""
    after = state
    for event in command.events:
        folded = evolve(after, event)
        if folded.awaiting == after.awaiting:
            return Rejected(
                f"the meter answered {event.kind} at seat {event.seat}, which the round "
                "did not ask for",
                RejectCode.UNEXPECTED_ANSWER,
                state,
            )
        after = folded
    return Accepted(tuple(command.events), after)


def decide(
    params: TableParams,
    state: TableState,
    command: Command | MeterAnswered,
    meter: MeterPort = meterbook.LOCAL_BOOK,
) -> Decision:
    """Apply ``command`` to ``state`` under ``params``; never raises for a bad command."""
    match command:
        case LinkedWagers():  # first: the link's stream of contributions is the hot path
            linked = meterbook.linked(
                params,
                state.balances,
                state.round,
                command.at,
                command.source_table,
                command.count,
                command.contribution_id,
            )
            return _outcome(state, linked)
        case Sensors() | Lock() | KeyHand() | Confirm() | Reject() | SamePlayer():
            return _round(params, state, command, meter)
        case Reconcile() | Void() | SetClosed():
            return _round(params, state, command, meter)
        case AdjustMeter():
            return _outcome(state, meterbook.adjust(params, state.balances, _view(state), command))
        case TransferMeter():
            return _outcome(
                state, meterbook.transfer(params, state.balances, _view(state), command)
            )
        case MeterAnswered():
            return _answered(state, command)
    return Rejected(f"unknown command {command!r}", RejectCode.UNKNOWN_COMMAND, state)


def _round(
    params: TableParams, state: TableState, command: RoundCommand, meter: MeterPort
) -> Decision:
    outcome = plan(params, state, command)
    if isinstance(outcome, Rejected):
        return outcome
    if not outcome:
        return Accepted((), state)
    return _run(params, state, outcome, meter, command.at)


def _view(state: TableState) -> meterbook.RoundView:
    return meterbook.RoundView(
        round=state.round,
        round_open=state.phase is not Phase.OPEN,
        meters_pending=frozenset(a.meter for a in state.pending),
    )


def _outcome(state: TableState, result: tuple[str, RejectCode] | Event) -> Decision:
    if isinstance(result, tuple):
        reason, code = result
        return Rejected(reason, code, state)
    return _accept(state, [result])
