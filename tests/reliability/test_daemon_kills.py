"""SIGKILL the daemon (the real process) at random points of play, many times.

Each cycle starts the daemon, plays random bets and keys (and, every few cycles, a scripted
round that must complete), and kills it with SIGKILL after a random delay — sometimes while
it is still starting. After every kill: every event the independent sign received is in
the ledger at the same seq (nothing acknowledged is lost), and the ledger verifies (hash
chain, postings, balances, snapshots, the accounting identity). At the end
`progressivectl ledger verify` and one more complete round.
"""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path

import pytest

from tests.reliability.rig import (
    KILLS,
    SEED,
    TALLY,
    check_all_published,
    check_nothing_acknowledged_lost,
    ctl_verify,
    random_play,
    rig,
    scripted_round,
)

pytestmark = pytest.mark.reliability


@pytest.mark.timeout(7200)
async def test_sigkill_the_daemon_during_play(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    db = tmp_path / "ledger.db"
    async with rig(tmp_path) as t:
        for cycle in range(KILLS):
            t.start_daemon()
            if rng.random() < 0.15:
                await asyncio.sleep(rng.uniform(0.05, 1.2))  # while starting / recovering
            else:
                await t.online(len(t.sub.events("board_online")) + 1)
                if cycle % 10 == 0:
                    await scripted_round(t, tuple(sorted(rng.sample(range(1, 8), 2))))
                play = asyncio.create_task(random_play(t, rng, 200, pause=0.03))
                await asyncio.sleep(rng.uniform(0.0, 1.5))
                play.cancel()
            assert t.kill(signal.SIGKILL) == -signal.SIGKILL, t.log()[-3000:]
            TALLY["daemon_sigkills"] += 1
            if db.exists():
                TALLY["published_events_checked"] = check_nothing_acknowledged_lost(t, db)
        t.start_daemon()
        await t.online(len(t.sub.events("board_online")) + 1)
        await scripted_round(t)
        await t.sub.wait(lambda: _outbox_empty(db), "outbox drained", timeout=30)
        await asyncio.sleep(0.5)
        check_all_published(t, db)
        TALLY["published_events_checked"] = check_nothing_acknowledged_lost(t, db)
        assert t.kill(signal.SIGTERM) == 0
    ctl_verify(db)
    TALLY["ledger_rows_after_kills"] = _head(db)


def _outbox_empty(db: Path) -> bool:
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return bool(conn.execute("SELECT count(*) FROM outbox").fetchone()[0] == 0)
    finally:
        conn.close()


def _head(db: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT max(seq) FROM journal").fetchone()[0])
    finally:
        conn.close()
