"""Journal timestamps never run backwards against ``seq`` (in the ledger and on the signs).

The board's hello used to journal ``board_online`` with the time of its write and then
``table_opened`` with the time the frame arrived, earlier: seq 7 before seq 6.
"""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import datetime
from itertools import pairwise
from pathlib import Path

import pytest

from progressived.runtime.clock import JournalClock
from tests.daemon_harness import table


def _instants(values: list[str]) -> list[datetime]:
    return [datetime.fromisoformat(v) for v in values]


def test_the_journal_clock_never_goes_backwards_even_if_the_wall_clock_does() -> None:
    readings = iter(
        [
            "2026-11-23T10:00:00.000005Z",
            "2026-11-23T09:59:59.000000Z",
            "2026-11-23T10:00:01.000000Z",
        ]
    )
    clock = JournalClock(lambda: next(readings))
    first = clock.stamp()
    assert clock.stamp() == first  # the wall clock stepped back: hold the last stamp
    assert clock.stamp("2026-11-23T10:00:00Z") == first  # a time taken earlier: held too
    assert clock.stamp() == "2026-11-23T10:00:01.000000Z"
    assert clock.stamp("2026-11-23T10:00:02Z") == "2026-11-23T10:00:02Z"


@pytest.mark.e2e
@pytest.mark.timeout(60)
async def test_ts_is_non_decreasing_with_seq_in_the_ledger_and_the_events(tmp_path: Path) -> None:
    async with table(tmp_path) as t:
        t.start_daemon()
        await t.online()
        await t.bets(1, 2)
        await t.press("LOCK")
        await t.collect(1, 2)
        await t.press("S1", "H5", "H1", "S9", "RECON", pause=0.02)  # one refused on the way
        await t.sub.wait_event("round_reconciled", timeout=15)
        await asyncio.sleep(0.3)
    conn = sqlite3.connect(f"file:{tmp_path / 'ledger.db'}?mode=ro", uri=True)
    rows = conn.execute("SELECT seq, kind, at FROM journal ORDER BY seq").fetchall()
    conn.close()
    kinds = [kind for _, kind, _ in rows]
    assert "board_online" in kinds and "table_opened" in kinds
    at = _instants([a for _, _, a in rows])
    backwards = [(rows[i], rows[i + 1]) for i in range(len(rows) - 1) if at[i + 1] < at[i]]
    assert not backwards
    events = sorted(t.sub.events(), key=lambda m: int(m["seq"]))
    ts = _instants([str(m["ts"]) for m in events])
    assert len(events) >= 6
    assert all(a <= b for a, b in pairwise(ts)), [(m["seq"], m["kind"], m["ts"]) for m in events]
