"""The chaos run (docs/reliability.md, docs/ha.md): the whole HA link on one machine
(progressived/testing/ha/link.py: 3 etcd, 3 Patroni/PostgreSQL, two brokers with the floor's
ACL, two link controllers) while protocol-level tables (tests/ha_tables.py) stream
contributions and claims, and the faults come one after another in a shuffled order:

* the PostgreSQL primary SIGKILLed (then restarted: it rejoins as a replica),
* the primary SIGSTOPped for ``RELIABILITY_HA_PAUSE_S`` and woken,
* the active link controller SIGKILLed (then started again: it stands by),
* the active controller SIGSTOPped past its lease and woken (it must commit nothing after),
* the broker most tables are on SIGKILLed (then started again).

Afterwards every message is applied exactly once (the ledger's rows, by table and sequence),
every table received a result for every message it made and none it received differs or is
missing from the ledger, the chain verifies, and no row of a paused controller's token is
after its successor's first. Each fault's time from the fault to the first message made
after it being answered is reported (p50 and max).

Counts (``RELIABILITY_HA_*``; the short version one of each): PRIMARY_KILLS 20,
PRIMARY_PAUSES 5, CONTROLLER_KILLS 20, CONTROLLER_PAUSES 5, BROKER_KILLS 5, TABLES 10,
MESSAGES 10,000 (at least; tables stream until the faults are done), PAUSE_S 30.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import psycopg
import pytest

from progressived.testing.ha import rig_available
from progressived.testing.ha.link import HaLink, ha_link
from tests.ha_tables import StreamTable, first_applied_after
from tests.link_sim import METER, SimTable
from tests.link_standby_rig import WRITTEN_BY
from tests.reliability.rig import NOTES, SEED, SHORT, TALLY, count

pytestmark = [
    pytest.mark.reliability,
    pytest.mark.timeout(
        int(os.environ.get("RELIABILITY_HA_TIMEOUT_S", "600" if SHORT else "7200"))
    ),
    pytest.mark.skipif(not rig_available(), reason="needs postgresql-15, patroni, etcd-server"),
]

FAULTS = {
    "primary_kill": count("HA_PRIMARY_KILLS", 20, 1),
    "primary_pause": count("HA_PRIMARY_PAUSES", 5, 1),
    "controller_kill": count("HA_CONTROLLER_KILLS", 20, 1),
    "controller_pause": count("HA_CONTROLLER_PAUSES", 5, 1),
    "broker_kill": count("HA_BROKER_KILLS", 5, 1),
}
TABLES = count("HA_TABLES", 10, 10)
MESSAGES = count("HA_MESSAGES", 10_000, 300)
PAUSE_S = float(os.environ.get("RELIABILITY_HA_PAUSE_S", "15" if SHORT else "30"))
LEASE_S = 5.0  # short: a controller paused past it is quickly replaced
ANSWER_TIMEOUT_S = 120.0  # "far inside the 2 minutes"
GAP_S = 2.0  # streaming undisturbed between faults


class Chaos:
    """The faults, each timed from the fault to the first new message answered."""

    def __init__(self, link: HaLink, tables: list[StreamTable]) -> None:
        self.link, self.tables = link, tables
        self.times: dict[str, list[float]] = {kind: [] for kind in FAULTS}
        self.fenced: list[tuple[str, str]] = []  # (the paused writer, its successor)

    async def answered_after(self, kind: str, at: float) -> None:
        deadline = at + ANSWER_TIMEOUT_S
        while (found := first_applied_after(self.tables, at)) is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{kind}: nothing answered for 120 s\n{self.state()}")
            await asyncio.sleep(0.05)
        self.times[kind].append(found - at)

    def state(self) -> str:
        """What the rig looks like now (for a failure's message): the database members, the
        controllers' roles and log tails, where the tables are and what they wait for."""
        db = self.link.db
        lines = [
            f"faults recovered from, s: { {k: [round(x, 1) for x in v] for k, v in self.times.items()} }"
        ]
        lines.append(f"database members: {db.members()}")
        for c in self.link.controllers:
            lines.append(f"--- {c.holder}: role {c.role()}, running {c.running()}")
            lines.append(c.child.tail(2000))
        for t in self.tables:
            lines.append(
                f"{t.id}: broker {t.broker}, seq {t.sim.seq}, outbox {sorted(t.sim.outbox)[:5]}"
            )
        for node in db.nodes:
            lines.append(f"--- {node.name}\n{node.child.tail(1500)}")
        return "\n".join(lines)

    async def primary_kill(self) -> None:
        db = self.link.db
        old = await asyncio.to_thread(db.wait_healthy)
        at = time.monotonic()
        db.kill(old)
        await self.answered_after("primary_kill", at)
        db.restart(old)
        await asyncio.to_thread(db.wait_healthy)

    async def primary_pause(self) -> None:
        db = self.link.db
        old = await asyncio.to_thread(db.wait_healthy)
        at = time.monotonic()
        db.pause(old)
        await self.answered_after("primary_pause", at)
        await asyncio.sleep(max(0.0, at + PAUSE_S - time.monotonic()))
        db.resume(old)
        await asyncio.to_thread(db.wait_healthy, 240)

    async def controller_kill(self) -> None:
        active = await asyncio.to_thread(self.link.wait_active)
        at = time.monotonic()
        active.kill()
        await self.answered_after("controller_kill", at)
        active.start()
        await asyncio.to_thread(self.link.wait_role, active, "standby", 120)

    async def controller_pause(self) -> None:
        active = await asyncio.to_thread(self.link.wait_active)
        status = active.status()
        assert status is not None
        writer = f"progressived {active.holder} token {status['lease']['token']}"
        at = time.monotonic()
        active.pause()
        successor = await asyncio.to_thread(self.link.wait_active, 120, not_=active)
        taken = successor.status()
        assert taken is not None and taken["lease"]["token"] > status["lease"]["token"]
        await self.answered_after("controller_pause", at)
        await asyncio.sleep(max(0.0, at + LEASE_S + 2 - time.monotonic()))
        active.resume()  # it wakes believing it holds the lease
        await asyncio.to_thread(self.link.wait_role, active, "standby", 120)
        self.fenced.append(
            (writer, f"progressived {successor.holder} token {taken['lease']['token']}")
        )

    async def broker_kill(self) -> None:
        on = Counter(t.broker for t in self.tables if t.broker is not None).most_common(1)
        broker = self.link.brokers[on[0][0] if on else 0]
        at = time.monotonic()
        self.link.kill_broker(broker)
        await self.answered_after("broker_kill", at)
        self.link.start_broker(broker)


def ledger_rows(link: HaLink, query: str) -> list[tuple[str, int]]:
    """Rows of two columns, as (text, integer)."""
    with psycopg.connect(link.ledger_url()) as conn:
        return [(str(a), int(b)) for a, b in conn.execute(query).fetchall()]


def summary(times: dict[str, list[float]]) -> str:
    parts = [
        f"{kind} x{len(ts)}: p50 {statistics.median(ts):.1f} s, max {max(ts):.1f} s"
        for kind, ts in times.items()
        if ts
    ]
    return "; ".join(parts)


async def test_the_ha_link_survives_every_kind_of_fault_mid_stream() -> None:
    rng = random.Random(SEED)
    plan = [kind for kind, n in FAULTS.items() for _ in range(n)]
    rng.shuffle(plan)
    pace = float(os.environ.get("RELIABILITY_HA_PACE_S", "0.5" if SHORT else "0.2"))
    with ha_link([f"t{i}" for i in range(1, TABLES + 1)], meter=METER, lease_s=LEASE_S) as link:
        with psycopg.connect(link.ledger_url(), autocommit=True) as conn:
            conn.execute(WRITTEN_BY)
        tables = [
            StreamTable(link, SimTable(t), 10**9, random.Random(rng.random()), pace_s=pace)
            for t in link.tables
        ]
        runs = [asyncio.create_task(t.run()) for t in tables]
        chaos = Chaos(link, tables)
        started = time.monotonic()
        try:
            for kind in plan:
                await asyncio.sleep(GAP_S)
                for run in runs:
                    if run.done():
                        run.result()  # a table that failed says why
                fault: Callable[[], Awaitable[None]] = getattr(chaos, kind)
                await fault()
            per_table = -(-MESSAGES // TABLES)
            for t in tables:
                t.quota = max(t.sim.seq, per_table)
            await asyncio.wait_for(asyncio.gather(*runs), 600)
        finally:
            for run in runs:
                run.cancel()
        elapsed = time.monotonic() - started

        rows = ledger_rows(
            link,
            "SELECT data::jsonb->>'table', (data::jsonb->>'seq')::int FROM journal "
            "WHERE kind IN ('link_applied', 'link_refused') ORDER BY seq",
        )
        keyed = rows
        assert len(keyed) == len(set(keyed)), "a message applied twice"
        for t in tables:
            made = list(range(1, t.sim.seq + 1))
            assert sorted(s for tb, s in keyed if tb == t.id) == made, t.id  # each once
            assert sorted(t.received_at) == made and not t.sim.outbox, t.id
            for results in t.sim.results.values():  # a repeat got the very same answer
                assert all(r == results[0] for r in results), results
        writers = ledger_rows(link, "SELECT app, seq FROM written_by ORDER BY seq")
        for writer, successor in chaos.fenced:
            old = [seq for app, seq in writers if app == writer]
            new = [seq for app, seq in writers if app == successor]
            assert new and (not old or max(old) < min(new)), (writer, successor)
        done = subprocess.run(
            [sys.executable, "-m", "progressived.cli.ctl", "ledger", "verify", "--db",
             link.ledger_url(), "--json", "--no-record"],
            capture_output=True, text=True, check=False, timeout=900,
        )  # fmt: skip
        report = json.loads(done.stdout)
        assert done.returncode == 0 and report["ok"], done.stdout + done.stderr
    messages = sum(t.sim.seq for t in tables)
    claims = sum(len(t.sim.claims) for t in tables)
    TALLY["ha_chaos_messages"] += messages
    TALLY["ha_chaos_claims"] += claims
    for kind, ts in chaos.times.items():
        TALLY[f"ha_chaos_{kind}"] += len(ts)
    NOTES.append(
        f"HA chaos: {TABLES} tables, {messages} messages ({claims} claims) in {elapsed:.0f} s; "
        f"fault -> first new message answered: {summary(chaos.times)}"
    )
    all_times = [x for ts in chaos.times.values() for x in ts]
    assert max(all_times) < ANSWER_TIMEOUT_S
