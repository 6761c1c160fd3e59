"""Shared pieces of the reliability suite: counts from the environment, the tally that
docs/reliability.md reports, a table with a restartable broker, random play and the checks
run after every fault.

Counts: ``RELIABILITY_SHORT=1`` is the CI version; otherwise the issue's numbers. Each can
be set: ``RELIABILITY_KILLS``, ``RELIABILITY_FUZZ_FRAMES``, ``RELIABILITY_KEYS``,
``RELIABILITY_OUTAGES``, ``RELIABILITY_SEED``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from progressived.link.store.audit import verify
from tests.daemon_harness import Table, table

SHORT = os.environ.get("RELIABILITY_SHORT", "") not in ("", "0")


def count(name: str, full: int, short: int) -> int:
    return int(os.environ.get(f"RELIABILITY_{name}", short if SHORT else full))


KILLS = count("KILLS", 100, 6)
FUZZ_FRAMES = count("FUZZ_FRAMES", 100_000, 20_000)
KEYS = count("KEYS", 3000, 300)
OUTAGES = count("OUTAGES", 3, 1)
SEED = int(os.environ.get("RELIABILITY_SEED", "20261121"))

# Every figure docs/reliability.md reports; summed over the session (conftest prints it).
TALLY: Counter[str] = Counter()
# Messages worth quoting in the report (e.g. the daemon's error when the disk is full).
NOTES: list[str] = []

KEY_CODES = [
    "LOCK", *(f"S{i}" for i in range(1, 8)), *(f"H{i}" for i in range(1, 6)),
    "OK", "NO", "RECON", "CLR",
]
PUBLISHED = ("round_locked", "hand_keyed", "award_keyed", "award_confirmed", "round_reconciled")


@contextlib.asynccontextmanager
async def rig(tmp: Path) -> AsyncIterator[Table]:
    """tests/daemon_harness.table, with a broker that saves its sessions every second (so a
    SIGKILLed broker comes back with the sign's subscription, as a production one would)
    and a daemon SIGKILLed at the end."""
    async with table(
        tmp, broker_config="autosave_interval 1\n", exit_signal=signal.SIGKILL,
        check_schemas=False,
    ) as t:
        yield t


async def random_play(t: Table, rng: random.Random, actions: int, pause: float = 0.02) -> None:
    """Bets, keys (any order), the supervisor key: whatever a confused table might do."""
    for _ in range(actions):
        roll = rng.random()
        if roll < 0.15:
            t.sim.place_bet(rng.randint(1, 7))
        elif roll < 0.25:
            t.sim.remove_bet(rng.randint(1, 7))
        elif roll < 0.30:
            t.sim.supervisor(not t.sim.supervisor_on)
        else:
            t.sim.press(rng.choice(KEY_CODES))
            TALLY["key_presses"] += 1
        await asyncio.sleep(rng.uniform(0, pause))


async def scripted_round(t: Table, seats: tuple[int, ...] = (1, 3)) -> dict[str, Any]:
    """A whole round that must work: bets, LOCK, a straight keyed, RECONCILE."""
    done_before = len(t.sub.events("round_reconciled"))
    t.sim.supervisor(False)
    for seat in range(1, 8):
        t.sim.remove_bet(seat)
    await asyncio.sleep(0.2)
    t.sim.press("CLR")
    t.sim.press("RECON")  # finishes a round left open by random play, if any
    t.sim.press("CLR")
    await asyncio.sleep(0.5)
    for _ in range(3):
        if len(t.sub.events("round_reconciled")) > done_before:
            break
        # Perhaps an award awaits the supervisor (however long ago the round was locked):
        # reject it, then reconcile. Harmless (refused and recorded) when there is none.
        t.sim.supervisor(True)
        await asyncio.sleep(0.2)
        t.sim.press("NO")
        t.sim.supervisor(False)
        await asyncio.sleep(0.2)
        t.sim.press("CLR")
        t.sim.press("RECON")
        await asyncio.sleep(0.5)
    locked_before = len(t.sub.events("round_locked"))
    done_before = len(t.sub.events("round_reconciled"))
    for seat in seats:
        t.sim.place_bet(seat)
    await asyncio.sleep(0.3)
    t.sim.press("LOCK")
    await t.sub.wait_event("round_locked", locked_before + 1, timeout=20)
    for seat in seats:
        t.sim.remove_bet(seat)
    await asyncio.sleep(0.2)
    t.sim.press(f"S{seats[0]}")
    t.sim.press("H5")
    t.sim.press("RECON")
    done = await t.sub.wait_event("round_reconciled", done_before + 1, timeout=20)
    TALLY["scripted_rounds"] += 1
    return done


def ledger_rows(db: Path) -> dict[int, tuple[str, int | None, int]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {
            int(s): (str(k), r, int(seat))
            for s, k, r, seat in conn.execute("SELECT seq, kind, round, seat FROM journal")
        }
    finally:
        conn.close()


def check_nothing_acknowledged_lost(t: Table, db: Path) -> int:
    """Every event the sign received (published only after its rows committed) is in the
    ledger, at the same seq, with the same round and seat; the ledger verifies. Returns the
    number of published events checked."""
    rows = ledger_rows(db)
    checked = 0
    for topic, message, _ in t.sub.messages:
        if not topic.endswith("/event") or "round" not in message:
            continue
        row = rows.get(int(message["seq"]))
        assert row is not None, f"published but not in the ledger: {message}"
        _, rnd, seat = row
        assert (rnd, seat) == (message["round"], message["seat"]), (row, message)
        checked += 1
    report = verify(db)
    assert report.ok, report.problems[:5]
    assert report.identity_gap == 0
    return checked


def check_all_published(t: Table, db: Path) -> None:
    """Every engine row that signs are told about reached the independent subscriber."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        journaled = {
            kind: {int(s) for (s,) in conn.execute("SELECT seq FROM journal WHERE kind = ?", (kind,))}
            for kind in ("round_locked", "hand_keyed", "award_keyed", "round_reconciled")
        }
    finally:
        conn.close()
    for kind, seqs in journaled.items():
        got = {int(e["seq"]) for e in t.sub.events(kind)}
        missing = seqs - got
        assert not missing, f"{kind}: journaled but never received: {sorted(missing)[:10]}"


def ctl_verify(db: Path) -> str:
    """`progressivectl ledger verify` as an operator runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "progressived.cli.ctl", "ledger", "verify", "--db", str(db)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def write_report(path: Path) -> None:
    path.write_text(
        json.dumps({"short": SHORT, "seed": SEED, **TALLY, "notes": NOTES}, indent=2) + "\n"
    )
