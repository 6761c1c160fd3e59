"""The linked progressive under faults: real processes, a real broker, SIGKILL loops.

A floor of ``LINK_TABLES`` tables (PMG, one linked meter) plays random rounds — wagers,
LOCK, now and then a royal or straight flush claimed and confirmed or rejected, RECON —
while the link controller is SIGKILLed ``LINK_KILLS`` times and table daemons
``TABLE_KILLS`` times, and the broker is frozen and then restarted without persistence. A
second test puts a faulty relay (drops, repeats, reorders) between the tables' broker and
the link's. Afterwards every ledger verifies, ``progressivectl link reconcile`` reports no
difference, and every contribution a table journaled as applied is counted exactly once.

Counts: ``RELIABILITY_LINK_KILLS`` (50; short 3), ``RELIABILITY_TABLE_KILLS`` (50; short 3),
``RELIABILITY_LINK_TABLES`` (5), ``RELIABILITY_RELAY_ROUNDS`` (60; short 12).
"""

from __future__ import annotations

import asyncio
import io
import random
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from progressived.demo.link import DemoTable, FloorRun, floor_processes, reconcile
from progressived.testing.broker import Mosquitto
from progressived.testing.relay import FaultyRelay
from progressived.testing.rig import PROGRESSIVECTL
from tests.reliability.rig import SEED, TALLY, count

pytestmark = pytest.mark.reliability

LINK_KILLS = count("LINK_KILLS", 50, 3)
TABLE_KILLS = count("TABLE_KILLS", 50, 3)
TABLES = count("LINK_TABLES", 5, 5)
RELAY_ROUNDS = count("RELAY_ROUNDS", 60, 12)


async def play_round(t: DemoTable, rng: random.Random) -> None:
    """One random round; a step the table refuses (closed, awaiting the link) is harmless."""
    seats = rng.sample(range(1, 8), rng.randint(1, 4))
    await t.type(*(f"bet {s}" for s in seats), pause=0.03)
    await asyncio.sleep(0.25)
    await t.type("key LOCK", *(f"unbet {s}" for s in seats), pause=0.03)
    roll = rng.random()
    if roll < 0.15:
        await t.type(f"key S{seats[0]}", f"key H{rng.choice([1, 2])}", pause=0.05)
        await asyncio.sleep(0.3)
        verdict = "OK" if rng.random() < 0.8 else "NO"
        await t.type("supervisor on", f"key {verdict}", "supervisor off", pause=0.05)
    elif roll < 0.5:
        await t.type(f"key S{seats[0]}", f"key H{rng.choice([3, 4, 5, 6])}", pause=0.05)
    await t.type("key RECON", pause=0.05)


async def settle(run: FloorRun) -> None:
    """Finish every round: confirm what awaits the supervisor, RECON, until nothing moves."""
    for _ in range(6):
        for t in run.tables:
            await t.type("supervisor on", "key OK", "supervisor off", "key RECON", pause=0.05)
        await asyncio.sleep(1.0)


def check_floor(work: Path, run: FloorRun) -> None:
    for db in [work / "link.db", *(t.work / "ledger.db" for t in run.tables)]:
        for _ in range(5):  # a running ledger may grow during the check: it says so
            done = subprocess.run(
                [*PROGRESSIVECTL, "ledger", "verify", "--db", str(db)],
                capture_output=True,
                text=True,
                check=False,
            )
            if "grew during the check" not in done.stdout:
                break
        assert done.returncode == 0, f"{db}: {done.stdout}{done.stderr}"
    status, report = reconcile(work, run.tables)
    for _ in range(40):
        if not report.get("in_flight"):
            break
        subprocess.run(["sleep", "0.5"], check=True)
        status, report = reconcile(work, run.tables)
    assert report.get("in_flight") == [], report
    assert report.get("differences") == [], report
    assert status == 0
    # Exactly once: each applied contribution at the tables is one link_applied row.
    link = sqlite3.connect(work / "link.db")
    applied = link.execute(
        "SELECT count(*), count(DISTINCT json_extract(data, '$.table') || ':' || "
        "json_extract(data, '$.seq')) FROM journal WHERE kind = 'link_applied'"
    ).fetchone()
    link.close()
    assert applied[0] == applied[1]
    TALLY["link_messages_applied"] += int(applied[0])


@pytest.mark.timeout(7200)
async def test_link_and_tables_killed(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    async with floor_processes(tmp_path, TABLES, io.StringIO()) as run:
        await asyncio.sleep(4)
        kills = [("link", None)] * LINK_KILLS + [("table", i % TABLES) for i in range(TABLE_KILLS)]
        rng.shuffle(kills)
        for what, index in kills:
            await asyncio.gather(*(play_round(t, rng) for t in run.tables))
            if what == "link":
                run.link.stop(signal.SIGKILL)
                await asyncio.sleep(rng.uniform(0.1, 2.5))
                run.link.start()
                TALLY["link_sigkills"] += 1
            else:
                assert index is not None
                victim = run.tables[index]
                victim.daemon.stop(signal.SIGKILL)
                await asyncio.sleep(rng.uniform(0.1, 1.0))
                victim.daemon.start()
                TALLY["table_sigkills"] += 1
        # The broker frozen, then restarted with persistence off (sessions and queued
        # messages gone): the outboxes still drain.
        broker = run.broker
        assert isinstance(broker, Mosquitto) and broker.proc is not None
        broker.proc.send_signal(signal.SIGSTOP)
        await asyncio.sleep(3)
        broker.proc.send_signal(signal.SIGCONT)
        await asyncio.gather(*(play_round(t, rng) for t in run.tables))
        broker.stop()
        await asyncio.sleep(1)
        broker.start()
        TALLY["broker_outages"] += 2
        await asyncio.gather(*(play_round(t, rng) for t in run.tables))
        await settle(run)
        await asyncio.sleep(3)
        check_floor(tmp_path, run)


@pytest.mark.timeout(3600)
async def test_faulty_relay(tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    async with floor_processes(tmp_path, TABLES, io.StringIO(), split_brokers=True) as run:
        relay = FaultyRelay(
            run.broker.port,
            run.link_broker.port,
            drop=0.05,
            duplicate=0.05,
            reorder=0.05,
            seed=SEED,
        )
        task = asyncio.create_task(relay.run())
        try:
            await asyncio.sleep(4)
            for _ in range(RELAY_ROUNDS):
                await asyncio.gather(*(play_round(t, rng) for t in run.tables))
            await settle(run)
            await asyncio.sleep(3)
            check_floor(tmp_path, run)
        finally:
            task.cancel()
        for name, value in relay.tally.items():
            TALLY[f"relay_{name}"] += value
        assert relay.tally["up_dropped"] + relay.tally["down_dropped"] > 0
