"""Random command sequences through the engine, with the invariants checked after every step.

After every command: the accounting identity holds to the last unit, postings balance,
nothing a player is owed is negative, the meter only goes down through a recorded award,
rejection, void or reset, a rejected command leaves the state untouched, and replaying the
events from scratch gives the same state.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from progressived.config.paytables import Paytable, find_paytable, paytable_from_mapping
from progressived.core.money import UNITS_PER_CENT
from progressived.core.params import AboveLimit, MeterParams, Policy, TableParams
from progressived.engine import (
    AdjustMeter,
    Confirm,
    KeyHand,
    LinkedWagers,
    Lock,
    Phase,
    Reconcile,
    Reject,
    SamePlayer,
    Sensors,
    SetClosed,
    TableState,
    Void,
    accounts,
    decide,
    evolve,
    initial_state,
)
from progressived.engine.commands import Command
from tests.budget import examples
from tests.conftest import PAYTABLES

PAYTABLE_IDS = ["tcp-sd-1", "tcp-sd-2", "tcp-pa-5", "uth-01", "uth-02", "pmg-01", "pmg-02"]
METER_DOWN_OK = {
    "award_keyed",
    "award_reversed",
    "wager_refunded",
    "meter_adjusted",
    "meter_transferred",
}
seats = st.integers(min_value=0, max_value=8)
rates = st.fractions(min_value=0, max_value=Fraction(1, 2), max_denominator=10_000)


class EngineMachine(RuleBasedStateMachine):
    params: TableParams
    state: TableState

    @initialize(
        paytable=st.sampled_from(PAYTABLE_IDS),
        policy=st.sampled_from(list(Policy)),
        rate=rates,
        reserve_rate=rates,
        start_cents=st.integers(min_value=100_000, max_value=10_000_000),
        limit_extra_cents=st.one_of(st.none(), st.integers(min_value=0, max_value=500)),
        above=st.sampled_from(list(AboveLimit)),
    )
    def setup(
        self,
        paytable: str,
        policy: Policy,
        rate: Fraction,
        reserve_rate: Fraction,
        start_cents: int,
        limit_extra_cents: int | None,
        above: AboveLimit,
    ) -> None:
        start = start_cents * UNITS_PER_CENT
        limit = None if limit_extra_cents is None else start + limit_extra_cents * UNITS_PER_CENT
        self.params = TableParams(
            table_id="t1",
            paytable=find_paytable(paytable, PAYTABLES),
            meters=(
                MeterParams(
                    rate=rate,
                    reserve_rate=reserve_rate,
                    start=start,
                    seed=100_000 * UNITS_PER_CENT,
                    limit=max(limit, 100_000 * UNITS_PER_CENT) if limit else None,
                    above_limit=above,
                ),
            ),
            seats=7,
            policy=policy,
        )
        opened = initial_state(self.params)
        self.state = opened.state
        self.events = list(opened.events)

    def apply(self, command: Command) -> None:
        before = self.state
        decision = decide(self.params, before, command)
        if not decision.accepted:
            assert decision.state is before
            assert decision.reason
            return
        state = before
        for event in decision.events:
            after = evolve(state, event)
            for meter_id in self.params.meter_ids:
                down = after.balance(accounts.meter(meter_id)) < state.balance(
                    accounts.meter(meter_id)
                )
                assert not down or event.kind in METER_DOWN_OK, event
            assert sum(p.units for p in event.postings) == 0, event
            state = after
        assert state == decision.state
        self.state = decision.state
        self.events.extend(decision.events)

    @rule(present=st.frozensets(seats, max_size=8))
    def sensors(self, present: frozenset[int]) -> None:
        self.apply(Sensors(present=present))

    @rule(present=st.frozensets(st.integers(min_value=1, max_value=7), min_size=1, max_size=7))
    def bets_then_lock(self, present: frozenset[int]) -> None:
        self.apply(Sensors(present=present))
        self.apply(Lock())

    @rule(data=st.data())
    def key_a_locked_seat(self, data: st.DataObject) -> None:
        """Most winners are keyed at seats holding a wager, often for a meter hand."""
        if not self.state.locked:
            return
        seat = data.draw(st.sampled_from(sorted(self.state.locked)))
        meter_hands = [r.hand.value for r in self.params.paytable.hands if r.pay.from_meter]
        hand = data.draw(st.sampled_from(meter_hands or list(self.params.paytable.hand_ids)))
        self.apply(KeyHand(seat=seat, hand=hand))

    @rule()
    def lock(self) -> None:
        self.apply(Lock())

    @rule(seat=seats, data=st.data())
    def key(self, seat: int, data: st.DataObject) -> None:
        hands = [*self.params.paytable.hand_ids, "akq-spades", "royal-flush", "bogus"]
        self.apply(KeyHand(seat=seat, hand=data.draw(st.sampled_from(hands))))

    @rule(supervisor=st.booleans())
    def confirm(self, supervisor: bool) -> None:
        self.apply(Confirm(supervisor=supervisor))

    @rule(supervisor=st.booleans())
    def reject(self, supervisor: bool) -> None:
        self.apply(Reject(supervisor=supervisor))

    @rule(group=st.frozensets(seats, max_size=3))
    def same(self, group: frozenset[int]) -> None:
        self.apply(SamePlayer(seats=group))

    @rule()
    def reconcile(self) -> None:
        self.apply(Reconcile())

    @rule(supervisor=st.booleans())
    def void(self, supervisor: bool) -> None:
        self.apply(Void(supervisor=supervisor))

    @rule(closed=st.booleans(), reason=st.sampled_from(["board offline", "operator", ""]))
    def close(self, closed: bool, reason: str) -> None:
        self.apply(SetClosed(reason=reason, closed=closed))

    @rule(count=st.integers(min_value=-1, max_value=50))
    def linked(self, count: int) -> None:
        self.apply(LinkedWagers(source_table="t9", count=count, contribution_id=f"c{count}"))

    @rule(
        units=st.integers(min_value=-200_000_000, max_value=200_000_000),
        approver=st.sampled_from(["ops-2", "ops-1", ""]),
    )
    def adjust(self, units: int, approver: str) -> None:
        self.apply(
            AdjustMeter(
                meter="main", units=units, reason="test", approved_by=approver, actor="ops-1"
            )
        )

    @invariant()
    def identity_holds_to_the_last_unit(self) -> None:
        balances = self.state.balances
        assert accounts.identity_gap(balances, self.params.meter_ids) == 0
        assert sum(balances.values()) == 0

    @invariant()
    def nothing_owed_is_negative(self) -> None:
        for meter_id in self.params.meter_ids:
            for account in (*accounts.holders(meter_id), accounts.paid_attendant(meter_id)):
                assert self.state.balance(account) >= 0, account
            assert self.state.balance(accounts.seed_funding(meter_id)) <= 0
        for account in (accounts.PAID_TRAY, accounts.PAID_ENVY, accounts.HOUSE_RETAINED):
            assert self.state.balance(account) >= 0

    @invariant()
    def between_rounds_no_award_is_left_unpaid(self) -> None:
        """RECONCILE pays every confirmed (under split: approved) award; VOID reverses the rest."""
        if self.state.phase is Phase.OPEN:
            for meter_id in self.params.meter_ids:
                assert self.state.balance(accounts.pending(meter_id)) == 0
            assert self.state.approved == ()

    @invariant()
    def meter_awards_are_whole_cents(self) -> None:
        for award in self.state.awards:
            assert award.units % UNITS_PER_CENT == 0

    @invariant()
    def replay_rebuilds_the_state(self) -> None:
        replayed = TableState()
        for event in self.events:
            replayed = evolve(replayed, event)
        assert replayed == self.state


EngineMachine.TestCase.settings = settings(
    max_examples=examples(200),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestEngineStateful = EngineMachine.TestCase


# --------------------------------------------------------------------------- split timing

SPLIT_PAYTABLE = paytable_from_mapping(
    {
        "id": "split-test",
        "name": "two meter hands one deck can deal several of",
        "game": "three-card-poker",
        "rule": "test",
        "wager": "1.00",
        "envy_requires_trigger_wager": True,
        "envy_rule": "test",
        "hands": [
            {"hand": "straight-flush", "pays": "100%", "envy": "5.00"},
            {"hand": "three-of-a-kind", "pays": "10%"},
            {"hand": "straight", "pays": "6 for 1"},
        ],
    }
)
SPLIT_HANDS = ["straight-flush", "three-of-a-kind", "straight"]


@cache
def _paytable(paytable_id: str) -> Paytable:
    return SPLIT_PAYTABLE if paytable_id == "split-test" else find_paytable(paytable_id, PAYTABLES)


def _split_params(paytable: str, rate: Fraction, reserve_rate: Fraction) -> TableParams:
    return TableParams(
        table_id="t1",
        paytable=_paytable(paytable),
        meters=(
            MeterParams(
                rate=rate, reserve_rate=reserve_rate, start=3_000 * 10_000 * 100, seed=10**9
            ),
        ),
        policy=Policy.SPLIT,
    )


def _settle(params: TableParams, commands: list[Command]) -> tuple[object, ...]:
    """Run ``commands``; the round's settlement and every money balance at the end."""
    state = initial_state(params).state
    events: list[Any] = []
    for command in commands:
        decision = decide(params, state, command)
        if decision.accepted:
            events.extend(decision.events)
        state = decision.state
        assert accounts.identity_gap(state.balances, params.meter_ids) == 0
        assert state.balance(accounts.meter("main")) >= 0
    settled = [e for e in events if e.kind == "round_reconciled"]
    assert len(settled) == 1
    balances = {account: units for account, units in state.balances.items() if units}
    return settled[0].settlement, balances


@given(
    paytable=st.sampled_from(["split-test", "pmg-01", "uth-01"]),
    rate=rates,
    reserve_rate=rates,
    data=st.data(),
)
@settings(max_examples=examples(200), deadline=None)
def test_split_shares_do_not_depend_on_when_the_supervisor_presses(
    paytable: str, rate: Fraction, reserve_rate: Fraction, data: st.DataObject
) -> None:
    """Under ``split`` the awards are a function of the keyed set and the policy.

    The same winners, the same verdicts (confirm or reject each award), pressed at random
    moments between the keys, give the settlement and balances of the plain order: key
    only the confirmed winners, then confirm them all. The identity holds at every step.
    """
    params = _split_params(paytable, rate, reserve_rate)
    hands = SPLIT_HANDS if paytable == "split-test" else list(params.paytable.hand_ids)
    locked = sorted(data.draw(st.sets(st.integers(1, 7), min_size=1), label="locked"))
    winners = data.draw(
        st.lists(
            st.tuples(st.sampled_from(locked), st.sampled_from(hands)),
            unique_by=lambda w: w[0],
            max_size=len(locked),
        ),
        label="winners",
    )
    start: list[Command] = [Sensors(present=frozenset(locked)), Lock()]
    # Keep the winners one deck can deal together (the guard refuses the others).
    state = initial_state(params).state
    for command in [*start, *(KeyHand(seat=s, hand=h) for s, h in winners)]:
        decision = decide(params, state, command)
        if not decision.accepted:
            winners.remove((command.seat, command.hand))
        state = decision.state
    verdict = {w: data.draw(st.booleans(), label=f"confirm {w}") for w in winners}
    for seat, hand in winners:  # only meter awards await the supervisor
        rule = params.paytable.rule_for(hand)
        if rule is not None and not rule.pay.from_meter:
            verdict[(seat, hand)] = True

    # Canonical: only the confirmed winners are keyed; every award confirmed after the keys.
    canonical = start + [KeyHand(seat=s, hand=h) for (s, h) in winners if verdict[(s, h)]]
    canonical += [Confirm()] * len(winners) + [Reconcile()]

    # Timed: every winner keyed; presses at random moments decide the first award waiting.
    state = initial_state(params).state
    timed: list[Command] = []
    for command in start:
        timed.append(command)
        state = decide(params, state, command).state
    for seat, hand in winners:
        timed.append(KeyHand(seat=seat, hand=hand))
        state = decide(params, state, timed[-1]).state
        while state.pending and data.draw(st.booleans(), label="press now"):
            first = state.pending[0]
            timed.append(Confirm() if verdict[(first.seat, first.hand)] else Reject())
            state = decide(params, state, timed[-1]).state
    while state.pending:
        first = state.pending[0]
        timed.append(Confirm() if verdict[(first.seat, first.hand)] else Reject())
        state = decide(params, state, timed[-1]).state
    timed.append(Reconcile())

    assert _settle(params, timed) == _settle(params, canonical)
