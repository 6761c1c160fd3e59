"""Engine behaviour beyond single rule clauses: rejections, limits, repricing, replay."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from progressived.config.paytables import paytable_from_mapping
from progressived.core.params import AboveLimit, MeterParams, Policy
from progressived.engine import (
    Confirm,
    KeyHand,
    LinkedWagers,
    Lock,
    Reconcile,
    Reject,
    Sensors,
    SetClosed,
    TableState,
    Void,
    accounts,
    decide,
    event_from_dict,
    event_to_dict,
    evolve,
    initial_state,
)
from progressived.engine.commands import Command, SamePlayer
from tests.helpers import CENT, DOLLAR, fresh, meter, reserve, run, sim, table


def locked_table(seats: frozenset[int] = frozenset({1, 2, 3})) -> tuple[object, TableState]:
    params = table(rate="0.1", reserve_rate="0.02")
    state, _ = run(params, fresh(params), Sensors(present=seats), Lock())
    return params, state


@pytest.mark.parametrize(
    ("command", "code"),
    [
        (Lock(), "already-locked"),
        (KeyHand(seat=8, hand="straight"), "bad-seat"),
        (KeyHand(seat=0, hand="straight"), "bad-seat"),
        (KeyHand(seat=1, hand="royal-flush"), "bad-hand"),
        (KeyHand(seat=1, hand="nonsense"), "bad-hand"),
        (KeyHand(seat=5, hand="straight"), "no-wager"),
        (Confirm(), "nothing-pending"),
        (Reject(), "nothing-pending"),
        (Void(supervisor=False), "supervisor-required"),
        (Sensors(present=frozenset({9})), "bad-seat"),
        (SamePlayer(seats=frozenset({1})), "bad-seat"),
        (LinkedWagers(source_table="t1", count=1, contribution_id="x"), "bad-source"),
        (LinkedWagers(source_table="t2", count=0, contribution_id="x"), "bad-count"),
        (SetClosed(reason=" ", closed=True), "no-reason"),
    ],
)
def test_a_command_that_does_not_fit_is_rejected_and_changes_nothing(
    command: Command, code: str
) -> None:
    params, state = locked_table()
    decision = decide(params, state, command)
    assert not decision.accepted
    assert decision.code == code
    assert decision.reason
    assert decision.state is state


def test_keys_before_lock_and_reconcile_without_a_round_are_rejected() -> None:
    params = table()
    state = fresh(params)
    for command in (KeyHand(seat=1, hand="straight"), Reconcile(), Void()):
        decision = decide(params, state, command)
        assert not decision.accepted and decision.state is state


def test_impossible_combinations_are_refused() -> None:
    s = sim(
        table(),
        "bet 1\nbet 2\nbet 3\nbet 4\nbet 5\nlock\nkey 1 akq-spades\nkey 2 akq-spades\n"
        "key 2 akq-suited\nkey 3 akq-suited\nkey 4 akq-suited\nkey 5 akq-suited\nkey 2 straight",
    )
    reasons = [r["reason"] for r in s.rejected]
    assert reasons[0] == (
        "impossible: one deck cannot deal 2 x akq-spades in one round (three cards per player)"
    )
    assert reasons[1] == (
        "impossible: one deck cannot deal 4 x akq-suited in one round (three cards per player)"
    )
    assert reasons[2].startswith("seat 2 is already keyed as akq-suited")


def test_uth_royal_group_limit() -> None:
    s = sim(table("uth-01"), "bet 1\nbet 2\nlock\nkey 1 royal-flush-first-5\nkey 2 royal-flush")
    assert s.rejected[0]["reason"] == (
        "impossible: one deck cannot deal royal-flush-first-5 and royal-flush in one round "
        "(two hole cards and a shared five-card board)"
    )


def test_pmg_royal_on_the_first_five_cards_is_one_per_round() -> None:
    # pmg reads hands on hole cards + flop: a royal needs both hole cards, so one per round
    s = sim(table("pmg-01"), "bet 1\nbet 2\nlock\nkey 1 royal-flush\nkey 2 royal-flush")
    assert s.rejected[0]["reason"] == (
        "impossible: one deck cannot deal 2 x royal-flush in one round "
        "(two hole cards and a shared flop)"
    )


def test_closed_progressive_refuses_lock_until_every_reason_clears() -> None:
    params = table()
    state, decisions = run(
        params,
        fresh(params),
        SetClosed(reason="board offline", closed=True),
        SetClosed(reason="operator", closed=True),
        SetClosed(reason="board offline", closed=False),
        Lock(),
    )
    assert not decisions[-1].accepted and "operator" in decisions[-1].reason
    state, decisions = run(params, state, SetClosed(reason="operator", closed=False), Lock())
    assert decisions[-1].accepted


def test_a_round_locked_before_closing_keeps_going() -> None:
    params = table()
    state, decisions = run(
        params,
        fresh(params),
        Sensors(present=frozenset({1})),
        Lock(),
        SetClosed(reason="board offline", closed=True),
        KeyHand(seat=1, hand="straight"),
        Reconcile(),
    )
    assert all(d.accepted for d in decisions)
    assert state.round == 2


def test_limit_sends_the_excess_to_the_reserve() -> None:
    params = table(rate="0.5", limit=1000 * DOLLAR + 60 * CENT, start=1000 * DOLLAR)
    s = sim(params, "bet 1\nbet 2\nlock")
    assert meter(s.state) == 1000 * DOLLAR + 60 * CENT
    assert reserve(s.state) == 40 * CENT


def test_limit_sends_the_excess_to_an_overflow_meter() -> None:
    params = table(rate="0.5", limit=1000 * DOLLAR + 60 * CENT, above_limit=AboveLimit.OVERFLOW)
    s = sim(params, "bet 1\nbet 2\nlock")
    assert meter(s.state) == 1000 * DOLLAR + 60 * CENT
    assert s.state.balance(accounts.overflow("main")) == 40 * CENT


def test_sub_unit_contribution_remainders_are_retained_not_lost() -> None:
    params = table(rate="0.3333333333", reserve_rate="0.0000001")
    s = sim(params, "bet 1\nlock")
    balances = s.state.balances
    assert balances[accounts.meter("main")] == 1000 * DOLLAR + 333_333
    assert balances.get(accounts.reserve("main"), 0) == 0
    assert balances[accounts.HOUSE_RETAINED] == DOLLAR - 333_333
    assert sum(balances.values()) == 0


def test_several_meters_each_take_their_share() -> None:
    mini = MeterParams(id="mini", seed=50 * DOLLAR, rate=Fraction(1, 100))
    s = sim(table(rate="0.1", extra_meters=(mini,)), "bet 1\nlock")
    assert meter(s.state) == 1000 * DOLLAR + 10 * CENT
    assert meter(s.state, "mini") == 50 * DOLLAR + 1 * CENT
    assert accounts.identity_gap(s.state.balances, ("main", "mini")) == 0


def test_rejection_restores_the_meter_keeping_contributions_posted_in_between() -> None:
    params = table(rate="0.1", reserve_rate="0.05")
    state, _ = run(params, fresh(params), Sensors(present=frozenset({1})), Lock())
    before_meter, before_reserve = meter(state), reserve(state)
    state, decisions = run(
        params,
        state,
        KeyHand(seat=1, hand="akq-spades"),
        LinkedWagers(source_table="t2", count=10, contribution_id="t2-77"),
        Reject(),
    )
    assert all(d.accepted for d in decisions)
    assert meter(state) == before_meter + 10 * 10 * CENT
    assert reserve(state) == before_reserve + 10 * 5 * CENT
    assert state.awards == ()


def test_awards_stay_locked_unless_an_award_ahead_of_them_changes() -> None:
    params = table("pmg-01", start=2000 * DOLLAR)
    state, _ = run(params, fresh(params), Sensors(present=frozenset({2, 4, 6})), Lock())
    state, _ = run(params, state, KeyHand(seat=4, hand="straight-flush"))
    # A linked contribution does not change an award already locked...
    state, _ = run(params, state, LinkedWagers(source_table="t2", count=1000, contribution_id="c"))
    state, decisions = run(params, state, KeyHand(seat=2, hand="straight-flush"))
    kinds = [e.kind for e in decisions[0].events]
    assert kinds == ["award_keyed"]
    # ...but an award keyed ahead of it in the counter-clockwise order reprices it. (One
    # flop deals at most two straight flushes in the first five cards: seat 2 goes first.)
    state, decisions = run(params, state, KeyHand(seat=2, hand="straight-flush"))
    assert [(e.kind, e.seat) for e in decisions[0].events] == [("award_reversed", 2)]
    state, decisions = run(params, state, KeyHand(seat=6, hand="straight-flush"))
    events = decisions[0].events
    assert [(e.kind, e.seat) for e in events] == [
        ("award_reversed", 4),
        ("award_keyed", 6),
        ("award_keyed", 4),
    ]
    assert [a.seat for a in state.awards] == [6, 4]


def test_a_confirmed_award_cannot_be_turned_off_and_blocks_void() -> None:
    params = table()
    state, decisions = run(
        params,
        fresh(params),
        Sensors(present=frozenset({1})),
        Lock(),
        KeyHand(seat=1, hand="akq-spades"),
        Confirm(),
        KeyHand(seat=1, hand="akq-spades"),
        Void(),
    )
    assert [d.accepted for d in decisions] == [True, True, True, True, False, False]
    assert decisions[4].code == "award-confirmed"
    assert decisions[5].code == "award-confirmed"


def test_confirm_needs_the_supervisor_key() -> None:
    params = table()
    state, decisions = run(
        params,
        fresh(params),
        Sensors(present=frozenset({1})),
        Lock(),
        KeyHand(seat=1, hand="akq-spades"),
        Confirm(supervisor=False),
    )
    assert decisions[-1].code == "supervisor-required"
    assert state.pending


def test_late_bets_are_reported_and_change_nothing() -> None:
    params = table(rate="0.1")
    state, _ = run(params, fresh(params), Sensors(present=frozenset({1})), Lock())
    balances = state.balances
    state, decisions = run(params, state, Sensors(present=frozenset({1, 5})))
    kinds = [(e.kind, e.seat) for e in decisions[0].events]
    assert ("late_bet", 5) in kinds
    assert state.locked == {1} and state.balances == balances
    # The dealer collecting the locked wager is expected: no late-bet report for seat 1.
    state, decisions = run(params, state, Sensors(present=frozenset({5})))
    assert [e.kind for e in decisions[0].events] == ["sensors_changed"]


def test_every_event_round_trips_through_json_and_replay_rebuilds_the_state() -> None:
    params = table("pmg-01", rate="0.1", reserve_rate="0.02")
    start = initial_state(params)
    events = list(start.events)
    state = start.state
    script = [
        Sensors(present=frozenset({1, 2, 3})),
        Lock(),
        SamePlayer(seats=frozenset({1, 2})),
        KeyHand(seat=3, hand="straight-flush"),
        KeyHand(seat=1, hand="royal-flush"),
        Reject(),
        Confirm(),
        KeyHand(seat=2, hand="flush"),
        Reconcile(),
        Sensors(present=frozenset({4})),
        Lock(),
        KeyHand(seat=4, hand="royal-flush"),
        Void(),
    ]
    for command in script:
        decision = decide(params, state, command)
        assert decision.accepted, decision
        events.extend(decision.events)
        state = decision.state
    replayed = TableState()
    for event in events:
        copy = event_from_dict(event_to_dict(event))
        assert copy == event
        assert sum(p.units for p in event.postings) == 0
        replayed = evolve(replayed, copy)
    assert replayed == state


def test_meter_adjustment_is_documented_two_person_and_balanced() -> None:
    from progressived.engine import AdjustMeter

    params = table()
    state = fresh(params)
    cases = [
        (
            AdjustMeter(meter="main", units=-5 * DOLLAR, reason="", approved_by="b", actor="a"),
            "no-reason",
        ),
        (
            AdjustMeter(meter="main", units=-5 * DOLLAR, reason="r", approved_by="a", actor="a"),
            "no-approval",
        ),
        (AdjustMeter(meter="main", units=-5 * DOLLAR, reason="r", approved_by="b"), "no-operator"),
        (AdjustMeter(meter="nope", units=1, reason="r", approved_by="b", actor="a"), "bad-meter"),
        (
            AdjustMeter(meter="main", units=-2000 * DOLLAR, reason="r", approved_by="b", actor="a"),
            "bad-amount",
        ),
    ]
    for command, code in cases:
        decision = decide(params, state, command)
        assert not decision.accepted
        assert decision.code == code
    ok = decide(
        params,
        state,
        AdjustMeter(
            meter="main",
            units=-25 * DOLLAR,
            reason="meter malfunction, ticket 7",
            approved_by="sup-2",
            actor="ops-1",
        ),
    )
    assert ok.accepted
    assert meter(ok.state) == 975 * DOLLAR
    assert accounts.identity_gap(ok.state.balances, ["main"]) == 0
    event = ok.events[0]
    assert (event.kind, event.reason, event.operator, event.approved_by) == (
        "meter_adjusted",
        "meter malfunction, ticket 7",
        "ops-1",
        "sup-2",
    )


def test_transfer_only_above_the_reset_value_and_not_mid_round() -> None:
    from progressived.engine import TransferMeter

    mini = MeterParams(id="mini", seed=50 * DOLLAR)
    params = table(start=1200 * DOLLAR, extra_meters=(mini,))
    state = fresh(params)

    def transfer(units: int) -> TransferMeter:
        return TransferMeter(
            from_meter="main",
            to_meter="mini",
            units=units,
            reason="discontinued",
            approved_by="b",
            actor="a",
        )

    assert decide(params, state, transfer(201 * DOLLAR)).code == "bad-amount"
    moved = decide(params, state, transfer(200 * DOLLAR))
    assert moved.accepted
    assert meter(moved.state) == 1000 * DOLLAR
    assert meter(moved.state, "mini") == 250 * DOLLAR
    locked, _ = run(params, state, Sensors(present=frozenset({1})), Lock())
    assert decide(params, locked, transfer(DOLLAR)).code == "round-open"


def test_split_an_early_confirm_does_not_change_how_a_group_shares() -> None:
    """A straight flush confirmed before the second one is keyed still shares equally."""
    params = table("pmg-01", start=2000 * DOLLAR, policy=Policy.SPLIT)
    state, _ = run(params, fresh(params), Sensors(present=frozenset({1, 3})), Lock())
    early, decisions = run(
        params,
        state,
        KeyHand(seat=1, hand="straight-flush"),
        Confirm(),
        KeyHand(seat=3, hand="straight-flush"),
        Confirm(),
        Reconcile(),
    )
    assert all(d.accepted for d in decisions)
    assert [e.kind for e in decisions[1].events] == ["award_approved"]
    late, _ = run(
        params,
        state,
        KeyHand(seat=1, hand="straight-flush"),
        KeyHand(seat=3, hand="straight-flush"),
        Confirm(),
        Confirm(),
        Reconcile(),
    )
    settled = decisions[-1].events[-1].settlement
    assert [(p.seat, p.source, p.units) for p in settled if p.source == "meter"] == [
        (3, "meter", 100 * DOLLAR),
        (1, "meter", 100 * DOLLAR),
    ]
    assert early.balances == late.balances
    assert early.balance(accounts.paid_attendant("main")) == 200 * DOLLAR
    paid = [e for e in decisions[-1].events if e.kind == "award_confirmed"]
    assert [(e.seat, e.units) for e in paid] == [(3, 100 * DOLLAR), (1, 100 * DOLLAR)]


def test_split_confirm_one_of_two_jackpots_then_reject_the_other_keeps_the_reset() -> None:
    """The meter is never left below the seed after a paid 100% award."""
    jackpot = paytable_from_mapping(
        {
            "id": "two-jackpots",
            "name": "a 100% hand one deck can deal twice",
            "game": "three-card-poker",
            "rule": "test",
            "wager": "1.00",
            "envy_requires_trigger_wager": True,
            "envy_rule": "test",
            "hands": [{"hand": "straight-flush", "pays": "100%"}],
        }
    )
    params = replace(table(start=3000 * DOLLAR, policy=Policy.SPLIT), paytable=jackpot)
    state, decisions = run(
        params,
        fresh(params),
        Sensors(present=frozenset({1, 3})),
        Lock(),
        KeyHand(seat=1, hand="straight-flush"),
        KeyHand(seat=3, hand="straight-flush"),
        Confirm(),  # seat 3, first in the counter-clockwise order
        Reject(),  # seat 1
        Reconcile(),
    )
    assert all(d.accepted for d in decisions)
    assert meter(state) == 1000 * DOLLAR  # reset to the seed
    assert state.balance(accounts.paid_attendant("main")) == 3000 * DOLLAR  # seat 3 alone
    settled = decisions[-1].events[-1].settlement
    assert [(p.seat, p.units) for p in settled] == [(3, 3000 * DOLLAR)]
    assert accounts.identity_gap(state.balances, params.meter_ids) == 0


def test_split_an_approved_award_cannot_be_turned_off_rejected_or_voided() -> None:
    params = table("pmg-01", start=2000 * DOLLAR, policy=Policy.SPLIT)
    state, decisions = run(
        params,
        fresh(params),
        Sensors(present=frozenset({1})),
        Lock(),
        KeyHand(seat=1, hand="straight-flush"),
        Confirm(),
        KeyHand(seat=1, hand="straight-flush"),
        Reject(),
        Void(),
    )
    assert [d.accepted for d in decisions] == [True, True, True, True, False, False, False]
    assert [d.code for d in decisions[4:]] == [
        "award-confirmed",
        "nothing-pending",
        "award-confirmed",
    ]
    assert state.balance(accounts.pending("main")) == 200 * DOLLAR
    assert not state.pending and state.unpaid
