"""Snapshots round-trip every engine state exactly (recovery depends on it)."""

from __future__ import annotations

import random
from dataclasses import replace
from types import MappingProxyType

from bench.stress import demo_params, round_commands
from progressived.engine import decide, initial_state
from progressived.engine.events import Posting
from progressived.engine.meter_requests import MeterAward
from progressived.engine.state import KeyedHand, Phase, TableState
from progressived.ledger import snapshot


def test_every_field_round_trips() -> None:
    state = TableState(
        round=42,
        phase=Phase.LOCKED,
        sensed=frozenset({2}),
        locked=frozenset({1, 3, 5}),
        wager_postings=((5, (Posting("wagers", -1), Posting("meter:main", 1))), (1, ())),
        keyed=(KeyedHand(3, "straight", "tray", 60_000_000), KeyedHand(1, "flush", "none", 0)),
        awards=(
            MeterAward(
                6,
                "akq-spades",
                "main",
                12_345_670_000,
                12_345_678_901,
                (Posting("meter:main", -5), Posting("award_pending:main", 5)),
                confirmed=True,
                share_of=2,
            ),
        ),
        same_player=(frozenset({1, 2}), frozenset({4, 7})),
        closed=frozenset({"board-offline", "operator"}),
        balances=MappingProxyType({"meter:main": 7, "reserve:main": 0, "wagers": -7}),
        opened=frozenset({"main", "mini"}),
    )
    text = snapshot.dumps(state)
    back = snapshot.loads(text)
    assert back == state
    assert back.balances["reserve:main"] == 0  # zero balances are kept
    assert snapshot.dumps(back) == text


def test_states_of_random_rounds_round_trip() -> None:
    params = demo_params()
    rng = random.Random(11)
    state = initial_state(params).state
    checked = 0
    for _ in range(60):
        for command in round_commands(rng, params):
            decision = decide(params, state, replace(command, at="t"))
            if decision.accepted:
                state = decision.state
            assert snapshot.loads(snapshot.dumps(state)) == state
            checked += 1
    assert checked > 300


def test_a_changed_field_is_not_equal() -> None:
    state = TableState(balances=MappingProxyType({"meter:main": 1}))
    assert snapshot.loads(snapshot.dumps(state)) != replace(
        state, balances=MappingProxyType({"meter:main": 2})
    )
