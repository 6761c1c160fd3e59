"""The database primary SIGKILLed under a stream of link ledger writes (docs/ha.md,
docs/reliability.md): 3 etcd members, 3 Patroni/PostgreSQL nodes (progressived/testing/ha),
a link ledger (LinkLedger over PostgresStore, the multi-host URL) committing one table's
contributions one by one while another thread kills the primary at a random moment.

Nothing acknowledged is lost: every message whose commit returned is in the ledger read from
the new primary, once; a message whose commit failed is sent again (as a table does from its
outbox) and is then either applied or answered from its stored result. The chain verifies
(``ledger verify``'s checks, the link's replay included). Failover time is measured from
the kill to the first commit acknowledged after it.

``RELIABILITY_HA_FAILOVERS`` sets how many (short: 1, full: 3).
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import threading
import time

import psycopg
import pytest

from progressived.ledger import LedgerUnavailable
from progressived.link.store.ledger import LinkLedger
from progressived.testing.ha import DatabaseCluster, PatroniNode, database_cluster
from tests.link_sim import SimTable, deliver, link_params
from tests.reliability.rig import NOTES, SEED, TALLY, count

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

FAILOVERS = count("HA_FAILOVERS", 3, 1)
AT = "2026-11-23T17:00:00Z"
BEFORE, AFTER = 40, 20  # acknowledged commits before each kill, and at least after it


class Killer(threading.Thread):
    """SIGKILLs ``node`` once ``acknowledged`` holds ``after`` commits, ``delay_s`` later
    (mid-stream, maybe mid-commit); :attr:`at` is when."""

    def __init__(
        self,
        db: DatabaseCluster,
        node: PatroniNode,
        acknowledged: list[int],
        after: int,
        delay_s: float,
    ) -> None:
        super().__init__(daemon=True)
        self.db, self.node, self.acknowledged = db, node, acknowledged
        self.after, self.delay_s = after, delay_s
        self.killed = threading.Event()
        self.at: float | None = None

    def run(self) -> None:
        deadline = time.monotonic() + 120
        while len(self.acknowledged) < self.after and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(self.delay_s)
        self.at = time.monotonic()
        self.db.kill(self.node)
        self.killed.set()


def test_a_killed_primary_loses_no_acknowledged_link_write() -> None:
    rng = random.Random(SEED)
    params = link_params()
    table = SimTable("t1")
    acknowledged: list[int] = []  # the table's seqs whose commit returned
    timings: list[float] = []
    with database_cluster(3) as db:
        url = db.database()
        LinkLedger.create(url, params, at=AT, software="reliability")
        ledger = LinkLedger.open(url, params, holder="link-1", lease_s=60)
        try:
            for _ in range(FAILOVERS):
                old = db.wait_healthy()
                standby = db.sync_standby()
                start = len(acknowledged)
                killer = Killer(db, old, acknowledged, start + BEFORE, rng.uniform(0, 0.05))
                killer.start()
                failed = 0
                first_after: float | None = None
                deadline = time.monotonic() + 120
                while not killer.killed.is_set() or len(acknowledged) < start + BEFORE + AFTER:
                    assert time.monotonic() < deadline, "no commit for 120 s"
                    message = table.contribute(rng.randint(1, 9))
                    while True:  # the table sends it again until it is answered
                        step = deliver(params, ledger.book, message, at_ms=message.seq)
                        try:
                            ledger.commit([(step, message.seq)])
                        except LedgerUnavailable:
                            failed += 1
                            time.sleep(0.02)
                            assert time.monotonic() < deadline, "no commit for 120 s"
                            continue
                        break
                    acknowledged.append(message.seq)
                    if killer.killed.is_set() and first_after is None:
                        first_after = time.monotonic()
                killer.join(5)
                assert killer.at is not None and first_after is not None and failed > 0
                timings.append(first_after - killer.at)
                assert db.primary() is standby  # only the synchronous standby is promoted
                db.restart(old)  # rejoins as a replica (pg_rewind) for the next round
        finally:
            ledger.close()

        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT data FROM journal WHERE kind = 'link_applied'").fetchall()
            (journal_rows,) = conn.execute("SELECT count(*) FROM journal").fetchone()
        applied = [json.loads(data) for (data,) in rows]
        seqs = [row["seq"] for row in applied if row.get("table") == "t1"]
        assert len(seqs) == len(set(seqs))  # none applied twice
        assert set(acknowledged) <= set(seqs)  # nothing acknowledged lost
        assert seqs == list(range(1, table.seq + 1))  # every message sent, in order
        done = subprocess.run(
            [sys.executable, "-m", "progressived.cli.ctl", "ledger", "verify", "--db", url,
             "--json", "--no-record"],
            capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        report = json.loads(done.stdout)
        assert done.returncode == 0 and report["ok"], done.stdout + done.stderr
        assert report["ledger_kind"] == "link" and report["head_seq"] == journal_rows
    TALLY["ha_primary_kills"] += FAILOVERS
    TALLY["ha_acknowledged_link_writes"] += len(acknowledged)
    NOTES.append(
        "database failover (SIGKILL of the primary -> first link commit after): "
        f"{', '.join(f'{t:.1f}' for t in timings)} s, p50 {statistics.median(timings):.1f} s, "
        f"max {max(timings):.1f} s"
    )
