"""The hot path's shortcuts give the same bytes as the engine's functions, and recovery
stays fast: it replays at most the snapshot interval, whatever the ledger's length."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

from bench.stress import demo_params, drive, round_commands
from progressived.engine import decide, event_to_dict, initial_state
from progressived.ledger import Ledger
from progressived.ledger.plan import event_dict as _event_dict

AT = "2026-11-21T19:00:00.000000Z"


def test_fast_event_dict_equals_event_to_dict() -> None:
    params = demo_params()
    rng = random.Random(3)
    state = initial_state(params).state
    kinds: set[str] = set()
    for _ in range(200):
        for command in round_commands(rng, params):
            decision = decide(params, state, replace(command, at=AT))
            if not decision.accepted:
                continue
            state = decision.state
            for event in decision.events:
                assert _event_dict(event) == event_to_dict(event)
                kinds.add(event.kind)
    assert {"wager_locked", "award_keyed", "round_reconciled", "envy_paid"} <= kinds


def test_recovery_time_does_not_grow_with_the_ledger(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    params = demo_params("t-p")
    with Ledger.open(db, params, at=AT) as ledger:
        drive(ledger, params, rounds=600, seed=8, run="r", group=64)
        state, head = ledger.state, ledger.head_seq
    assert head > 5000
    with Ledger.open(db, params, at=AT) as ledger:
        assert ledger.state == state
        # Bounded by the snapshot interval (1,000 rows), not the ledger's 5,000 and more:
        # counted, not timed (tests/reliability/test_ledger_recovery_1m.py times 1M events).
        assert ledger.recovery.snapshot_seq > 0
        assert ledger.recovery.replayed <= 1000
