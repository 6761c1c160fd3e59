"""The engine's hot-path shortcuts give exactly what the general code gives: the integer
share against ``floor`` of the ``Fraction`` product, the state copy against
``dataclasses.replace``, and ``evolve``'s money-only path against the full match (replayed
rounds of every kind, so every event kind passes through ``evolve``)."""

from __future__ import annotations

import dataclasses
import importlib
import random
from dataclasses import replace
from fractions import Fraction
from math import floor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.stress import demo_params, round_commands
from progressived.config.paytables import find_paytable
from progressived.core.params import MeterParams, TableParams
from progressived.engine import accounts, decide, evolve, initial_state
from progressived.engine.events import Event
from progressived.engine.meterbook import contributions
from progressived.engine.state import Phase, TableState, replaced, with_balances
from tests.budget import examples

# The module, not the function the package re-exports under its name.
evolve_module = importlib.import_module("progressived.engine.evolve")
AT = "2026-11-21T19:00:00.000000Z"


@settings(max_examples=examples(500), deadline=None)
@given(
    wager=st.integers(-(10**15), 10**15),
    rate=st.fractions(min_value=-2, max_value=2, max_denominator=10**9),
)
def test_share_is_floor_of_the_fraction_product(wager: int, rate: Fraction) -> None:
    share = contributions._share(wager, rate)
    assert type(share) is int
    assert share == floor(wager * rate)


def test_share_of_an_int_rate_and_of_a_float() -> None:
    assert contributions._share(7, 1) == 7
    assert contributions._share(10, 0.15) == floor(10 * 0.15)


def test_replaced_equals_dataclasses_replace() -> None:
    state = TableState(round=4, phase=Phase.LOCKED, locked=frozenset({1, 2}), linked_off=True)
    for changes in ({}, {"round": 5}, {"balances": {"a": 1}, "closed": frozenset({"x"})}):
        got, want = replaced(state, **changes), replace(state, **changes)
        assert got == want
        assert all(
            getattr(got, f.name) is getattr(want, f.name) for f in dataclasses.fields(TableState)
        )
    balances = {"meter:main": 5, "wagers": -5}
    assert with_balances(state, balances) == replace(state, balances=balances)
    assert with_balances(state, balances).balances is balances
    with pytest.raises(TypeError):
        replaced(state, no_such_field=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        replaced(state).round = 9


def test_money_only_events_fold_as_the_full_match_does(monkeypatch: pytest.MonkeyPatch) -> None:
    params = demo_params()
    rng = random.Random(5)
    state = initial_state(params).state
    kinds: set[str] = set()
    folds = []
    for _ in range(150):
        for command in round_commands(rng, params):
            decision = decide(params, state, replace(command, at=AT))
            if decision.accepted:
                folds.append((state, decision.events))
                state = decision.state
                kinds.update(e.kind for e in decision.events)
    fast = [evolve_all(before, events) for before, events in folds]
    monkeypatch.setattr(evolve_module, "_BALANCES_ONLY", frozenset())
    assert [evolve_all(before, events) for before, events in folds] == fast
    assert {"envy_paid", "tray_paid", "wager_locked", "round_reconciled"} <= kinds


def evolve_all(state: TableState, events: tuple[Event, ...]) -> TableState:
    for event in events:
        state = evolve(state, event)
    return state


def test_cached_contributions_equal_the_computed_ones() -> None:
    meter = MeterParams(rate=Fraction(15, 100), reserve_rate=Fraction(5, 100))
    unlimited = TableParams(table_id="t-1", paytable=find_paytable("tcp-sd-1"), meters=(meter,))
    limited = replace(unlimited, meters=(replace(meter, limit=unlimited.start_units(meter) + 5),))
    full = {accounts.meter("main"): 10**12}
    for params in (unlimited, limited, replace(unlimited)):  # a copy: its own cache entry
        for balances in ({}, full, {}):
            for count in (1, 7, 1):
                got = contributions.contribution(params, balances, count, accounts.LINKED_WAGERS)
                want = contributions._contribution(params, balances, count, accounts.LINKED_WAGERS)
                assert got == want
    # Under a limit the balances decide (the full meter's share goes to the reserve).
    assert contributions.contribution(limited, full, 1) != contributions.contribution(
        limited, {}, 1
    )
