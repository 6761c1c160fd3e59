"""Recovery of a one-million-event ledger takes well under a second (snapshots).

Builds the ledger through the real write path with group commit (a few minutes on a
small machine), so it lives in the reliability suite. ``LEDGER_RECOVERY_EVENTS`` changes
the size.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bench.stress import demo_params
from progressived.engine import Lock, Reconcile, Sensors, decide
from progressived.ledger import Batch, Ledger
from tests.reliability.rig import TALLY

pytestmark = pytest.mark.reliability
AT = "2026-11-21T19:00:00.000000Z"


@pytest.mark.timeout(3600)
def test_recover_a_million_events(tmp_path: Path) -> None:
    target = int(os.environ.get("LEDGER_RECOVERY_EVENTS", "1000000"))
    db = tmp_path / "big.db"
    params = demo_params("t-big")
    with Ledger.open(db, params, at=AT) as ledger:
        state = ledger.state
        batches: list[Batch] = []
        round_no = 0
        while ledger.head_seq + sum(len(b.events) for b in batches) < target:
            round_no += 1
            seats = frozenset(range(1, 1 + round_no % params.seats + 1))
            commands = (
                Sensors(present=seats, at=AT),
                Lock(at=AT),
                Sensors(present=frozenset(), at=AT),
                Reconcile(at=AT),
            )
            for index, command in enumerate(commands):
                decision = decide(params, state, command)
                assert decision.accepted
                state = decision.state
                key = f"frame-{round_no}-{index}"
                batches.append(Batch(decision.events, state, AT, "dealer", key))
            if len(batches) >= 400:
                ledger.append_many(batches)
                batches = []
        # leave a round in progress
        for command in (Sensors(present=frozenset({2, 3}), at=AT), Lock(at=AT)):
            decision = decide(params, state, command)
            assert decision.accepted
            state = decision.state
            batches.append(Batch(decision.events, state, AT, "dealer"))
        ledger.append_many(batches)
        head = ledger.head_seq
    assert head >= target
    started = time.perf_counter()
    with Ledger.open(db, params, at=AT) as ledger:
        elapsed = time.perf_counter() - started
        assert ledger.state == state
        assert ledger.head_seq == head
    print(f"recovered {head} rows in {elapsed:.3f}s")
    assert elapsed < 0.5, f"recovery of {head} rows took {elapsed:.3f}s"
    TALLY["recovery_ledger_events"] += head
    TALLY["recovery_ms"] += round(elapsed * 1000)
