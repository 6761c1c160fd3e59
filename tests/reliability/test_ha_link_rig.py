"""The whole HA rig (progressived/testing/ha/link.py, docs/ha.md "The rig"): 3 etcd, 3
Patroni/PostgreSQL, two brokers with the floor's accounts and ACL, two link controllers.

Two tables stream through it; the active controller is SIGKILLed and the broker the tables
are on is SIGKILLed mid-stream: the standby takes over, the tables move to the other broker,
every message is applied exactly once, and the brokers refuse a table speaking for another.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

import aiomqtt
import psycopg
import pytest

from progressived.testing.ha import rig_available
from progressived.testing.ha.link import LINK, HaLink, ha_link
from tests.ha_tables import StreamTable
from tests.link_sim import METER, SimTable

pytestmark = [
    pytest.mark.reliability,
    pytest.mark.timeout(600),
    pytest.mark.skipif(not rig_available(), reason="needs postgresql-15, patroni, etcd-server"),
]


def applied(link: HaLink) -> list[tuple[str, int]]:
    with psycopg.connect(link.ledger_url()) as conn:
        rows = conn.execute(
            "SELECT data::jsonb->>'table', (data::jsonb->>'seq')::int FROM journal "
            "WHERE kind IN ('link_applied', 'link_refused') ORDER BY seq"
        ).fetchall()
    return [(str(t), int(s)) for t, s in rows]


async def wait_for(check: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_the_rig_survives_a_controller_and_a_broker_killed_mid_stream() -> None:
    with ha_link(["t1", "t2"], meter=METER, lease_s=4) as link:
        # the ACL: t1 cannot speak for t2
        async with aiomqtt.Client(
            "127.0.0.1", link.brokers[0].port, username="t1", password=link.passwords["t1"]
        ) as forger:
            await forger.publish(f"progressive/link/{LINK}/from/t2", b"{}", qos=1)
        with pytest.raises(aiomqtt.MqttError):
            async with aiomqtt.Client(
                "127.0.0.1", link.brokers[0].port, username="t1", password="wrong"
            ):
                pass
        rng = random.Random(7)
        tables = [StreamTable(link, SimTable(f"t{i}"), 120, rng) for i in (1, 2)]
        runs = [asyncio.create_task(t.run()) for t in tables]
        try:
            await wait_for(lambda: all(len(t.received_at) >= 20 for t in tables), 60)
            first = link.wait_active(5)
            first.kill()
            second = await asyncio.to_thread(link.wait_active, 60, not_=first)
            assert second is not first
            await wait_for(lambda: all(len(t.received_at) >= 60 for t in tables), 60)
            on = tables[0].broker
            assert on is not None
            link.kill_broker(link.brokers[on])
            await asyncio.wait_for(asyncio.gather(*runs), 120)
        finally:
            for run in runs:
                run.cancel()
        assert all(t.moves >= 1 for t in tables)  # each moved to the other broker
        rows = applied(link)
        assert len(rows) == len(set(rows))  # nothing twice
        for t in tables:
            assert sorted(s for tb, s in rows if tb == t.id) == list(range(1, t.sim.seq + 1))
            assert set(t.received_at) == set(range(1, t.sim.seq + 1))
        # a forged message (t1 on t2's topic) never reached the link
        assert ("t2", 0) not in rows
