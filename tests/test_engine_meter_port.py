"""The meter port: a meter that answers later is a normal state of the round (pure tests).

``DeferredMeter`` is a test double of a meter port that never answers at once (as a linked
meter behind a broker would): the round records what it asked (``meter_requested``), shows
the claim as pending, refuses what cannot go on without the meter's answer, and carries on
when the answer (here: the local meter book's, computed later) arrives.
"""

from __future__ import annotations

from collections.abc import Sequence

from progressived.board.lights import Light, lights
from progressived.core.params import Policy, TableParams
from progressived.engine import (
    LOCAL_BOOK,
    Accepted,
    Command,
    Confirm,
    Decision,
    KeyHand,
    Lock,
    MeterAnswered,
    Reconcile,
    Reject,
    Sensors,
    TableState,
    Void,
    decide,
    evolve,
)
from progressived.engine.events import AwardKeyed, Event, RoundLocked, WagerLocked
from progressived.engine.meter_port import (
    Claim,
    Contribute,
    MeterRequest,
    MeterRequested,
    PostAward,
    ReserveAwards,
)
from tests.helpers import fresh, table


class DeferredMeter:
    """A meter port that answers nothing now: every request waits for :meth:`reply`."""

    def __init__(self) -> None:
        self.asked: list[MeterRequest] = []

    def answer(
        self, params: TableParams, state: TableState, request: MeterRequest, at: str
    ) -> tuple[Event, ...] | None:
        self.asked.append(request)
        return None

    @staticmethod
    def reply(params: TableParams, state: TableState, at: str = "later") -> MeterAnswered:
        """The meter's late answer to everything the round awaits (priced by a local book on
        the state as it stands when the answer is made)."""
        events: list[Event] = []
        current = state
        for request in state.awaiting:
            for event in LOCAL_BOOK.answer(params, current, request, at):
                events.append(event)
                current = evolve(current, event)
        return MeterAnswered(events=tuple(events), at=at)


def accepted(decision: Decision) -> Accepted:
    assert isinstance(decision, Accepted), decision
    return decision


def pmg(policy: Policy = Policy.SEQUENTIAL) -> TableParams:
    return table("pmg-01", rate="0.15", reserve_rate="0.02", policy=policy)


def test_a_lock_whose_contributions_are_not_acknowledged_is_a_state_of_the_round() -> None:
    params = pmg()
    meter = DeferredMeter()
    state = accepted(decide(params, fresh(params), Sensors(present=frozenset({1, 4})))).state
    before = dict(state.balances)
    locked = accepted(decide(params, state, Lock(), meter))
    kinds = [type(e) for e in locked.events]
    assert kinds == [RoundLocked, MeterRequested, MeterRequested]
    assert meter.asked == [
        Contribute(round=1, seat=1, units=params.wager_units),
        Contribute(round=1, seat=4, units=params.wager_units),
    ]
    state = locked.state
    assert dict(state.balances) == before  # nothing posted on a meter the round does not hold
    assert state.locked == {1, 4} and len(state.awaiting) == 2
    assert lights(state, 7)[1] is Light.LOCKED
    for command in (Reconcile(), Void(), KeyHand(seat=1, hand="royal-flush")):
        refused = decide(params, state, command, meter)
        assert not refused.accepted and refused.code == "meter-pending", refused
        assert refused.state is state
    # A tray hand needs no meter: keyed while the meter is silent.
    assert accepted(decide(params, state, KeyHand(seat=4, hand="flush"), meter)).events

    answered = accepted(decide(params, state, DeferredMeter.reply(params, state)))
    assert [type(e) for e in answered.events] == [WagerLocked, WagerLocked]
    assert answered.state.awaiting == ()
    local = accepted(
        decide(
            params,
            accepted(decide(params, fresh(params), Sensors(present=frozenset({1, 4})))).state,
            Lock(),
        )
    )
    assert answered.state.balances == local.state.balances


def test_a_claim_keyed_but_not_priced_is_pending_and_not_payable() -> None:
    params = pmg()
    meter = DeferredMeter()
    state = fresh(params)
    for command in (Sensors(present=frozenset({2, 3, 5})), Lock()):
        state = accepted(decide(params, state, command)).state  # contributions: local, at once
    keyed = accepted(decide(params, state, KeyHand(seat=3, hand="royal-flush"), meter))
    claim = Claim(seat=3, hand="royal-flush", meter="main")
    assert meter.asked == [ReserveAwards(round=1, claims=(claim,), first_order=0)]
    state = keyed.state
    assert state.claims_awaiting_meter == ((3, "royal-flush"),)
    assert state.awards == () and state.pending == ()  # no amount yet: nothing to pay
    assert dict(state.balances) == dict(keyed.state.balances)
    assert lights(state, 7)[3] is Light.WINNER and lights(state, 7)[2] is Light.LOCKED
    for command, code in (
        (Reconcile(), "meter-pending"),
        (Confirm(), "meter-pending"),
        (KeyHand(seat=2, hand="straight-flush"), "meter-pending"),
        (KeyHand(seat=3, hand="flush"), "seat-already-keyed"),
    ):
        refused = decide(params, state, command, meter)
        assert not refused.accepted and refused.code == code, (command, refused)
    reconcile = decide(params, state, Reconcile(), meter)
    assert (
        not reconcile.accepted
        and "royal-flush claim at seat 3 awaits the meter" in reconcile.reason
    )

    priced = accepted(decide(params, state, DeferredMeter.reply(params, state)))
    (award,) = priced.events
    assert isinstance(award, AwardKeyed) and award.seat == 3 and award.units > 0
    state = priced.state
    assert state.awaiting == () and [a.seat for a in state.pending] == [3]
    # The two-phase award: reserved (award_pending), then posted when the supervisor confirms.
    assert state.balance("award_pending:main") == award.units
    confirmed = accepted(decide(params, state, Confirm(), meter))
    assert meter.asked[-1] == PostAward(round=1, award=state.pending[0], by="dealer")
    state = accepted(
        decide(params, confirmed.state, DeferredMeter.reply(params, confirmed.state))
    ).state
    assert state.balance("award_pending:main") == 0
    assert state.balance("paid_attendant:main") == award.units
    assert accepted(decide(params, state, Reconcile(), meter)).events


def test_an_answer_the_round_did_not_ask_for_is_refused_and_changes_nothing() -> None:
    params = pmg()
    state = fresh(params)
    for command in (Sensors(present=frozenset({2})), Lock()):
        state = accepted(decide(params, state, command)).state
    stray = AwardKeyed(
        at="x",
        round=state.round,
        seat=2,
        hand="royal-flush",
        meter="main",
        units=100,
        meter_before=0,
        meter_after=0,
        reset_reserve=0,
        reset_seed=0,
        order=0,
    )
    refused = decide(params, state, MeterAnswered(events=(stray,)))
    assert not refused.accepted and refused.code == "unexpected-answer"
    assert refused.state is state


def play(
    params: TableParams, commands: Sequence[Command], deferred: bool
) -> tuple[TableState, list[Event]]:
    """Play ``commands``; with ``deferred`` every meter request is answered only afterwards."""
    state = fresh(params)
    money: list[Event] = []
    meter = DeferredMeter()
    for command in commands:
        decision = (
            decide(params, state, command, meter) if deferred else decide(params, state, command)
        )
        assert decision.accepted, (command, decision)
        state = decision.state
        money += [e for e in decision.events if e.postings]
        if state.awaiting:
            answered = accepted(decide(params, state, DeferredMeter.reply(params, state, "")))
            state = answered.state
            money += [e for e in answered.events if e.postings]
    return state, money


def test_a_meter_answering_later_gives_the_local_book_s_figures_under_both_policies() -> None:
    commands: list[Command] = [
        Sensors(present=frozenset({1, 2, 3, 5, 6})),
        Lock(),
        KeyHand(seat=5, hand="straight-flush"),
        KeyHand(seat=2, hand="straight-flush"),  # ahead of seat 5: reprices (or splits)
        KeyHand(seat=3, hand="straight"),
        KeyHand(seat=6, hand="flush"),
        Reject(),
        Confirm(),
        Reconcile(),
        Sensors(present=frozenset({1, 4})),
        Lock(),
        KeyHand(seat=1, hand="royal-flush"),  # 100%: the meter resets to seed + reserve
        Confirm(),
        Reconcile(),
        Sensors(present=frozenset({2, 7})),
        Lock(),
        KeyHand(seat=7, hand="straight-flush"),
        Void(),
    ]
    for policy in Policy:
        params = pmg(policy)
        local_state, local_money = play(params, commands, deferred=False)
        later_state, later_money = play(params, commands, deferred=True)
        # The same money events; a posting a closing round asked for (split: the approved
        # awards paid at RECONCILE) may be journaled after the round's own events.
        assert sorted(map(repr, later_money)) == sorted(map(repr, local_money)), policy
        if policy is Policy.SEQUENTIAL:
            assert later_money == local_money
        assert later_state.balances == local_state.balances
        assert later_state.round == local_state.round == 4
        splits = {e.share_of for e in local_money if isinstance(e, AwardKeyed)}
        assert splits == ({1} if policy is Policy.SEQUENTIAL else {1, 2})


def test_events_py_alone_names_every_engine_event_and_its_codec() -> None:
    """No module adds event kinds or field codecs to another at import: ``events.py``
    defines the deferred meter's events too (``meter_port`` re-exports them), so the
    registry is whole whatever was imported first."""
    from progressived.engine import events, meter_port
    from progressived.engine.events import Posting
    from progressived.engine.meter_port import ClaimRefused, MeterAward

    assert not hasattr(events, "FIELD_CODECS")
    assert {cls.__module__ for cls in events.EVENT_TYPES.values()} == {events.__name__}
    assert meter_port.MeterRequested is events.EVENT_TYPES["meter_requested"]
    assert ClaimRefused is events.EVENT_TYPES["claim_refused"]
    award = MeterAward(
        seat=2, hand="royal-flush", meter="main", units=10_000, meter_before=90_000,
        postings=(Posting("meter:main", -10_000), Posting("award_pending:main", 10_000)),
    )  # fmt: skip
    for event in (
        MeterRequested(at="t", round=3, request=PostAward(round=3, award=award, by="sup")),
        MeterRequested(at="t", round=3, request=ReserveAwards(
            round=3, claims=(Claim(2, "royal-flush", "main"),), first_order=0)),
        ClaimRefused(at="t", round=3, seat=2, hand="royal-flush", meter="main",
                     code="unknown-hand", reason="no such hand"),
    ):  # fmt: skip
        assert events.event_from_dict(events.event_to_dict(event)) == event
