"""Failover of the link's database: SIGKILL of the primary -> the first link ledger commit
acknowledged after it, on the HA rig (progressived/testing/ha: 3 etcd members, 3
Patroni/PostgreSQL nodes, synchronous and strict).

    .venv/bin/python -m bench.ha_failover [--runs 5] [--out FILE]

Each run: the rig healthy, a PostgresStore (the link's multi-host URL, a lease) commits,
the primary (Patroni, its PostgreSQL, every backend) is SIGKILLed, and the store tries to
commit every 20 ms until one is acknowledged. A watcher notes when the DCS lost the leader
key, when the synchronous standby was primary (Patroni's ``/primary`` and out of recovery)
and when it had a synchronous standby of its own; the killed node is restarted (it rejoins
with pg_rewind) before the next run. The floor is Patroni's ``ttl``: without a clean
shutdown nobody may take over before the lost leader's key expires, so failover / ttl is
the rest's cost (docs/ha.md, "Measured failover").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from bench.measure import machine
from progressived.engine.events import Posting
from progressived.ledger import LedgerUnavailable, plan
from progressived.ledger.rows import Record
from progressived.link.store.opening import open_store
from progressived.storage.port import Lease
from progressived.storage.postgres import PostgresStore
from progressived.testing.ha import DatabaseCluster, PatroniNode, database_cluster, settings

AT = "2026-11-23T17:00:00Z"


def _rows(store: PostgresStore, seq: int) -> plan.Plan:
    records = [
        Record(
            kind="link_applied",
            detail={"n": seq},
            at=AT,
            actor="t1",
            category="engine",
            idempotency_key=f"t1:{seq}",
            postings=(Posting("linked_wagers:pmg", -7), Posting("meter:pmg", 7)),
        )
    ]
    last, digest = store.last()
    head = plan.CommittedHead(last, digest, store.balances())
    return plan.plan(records, head, {}, table_id="link-a", snapshot_every=2**62)


class Watcher(threading.Thread):
    """Notes, from the kill, when each step of the failover became visible."""

    def __init__(self, db: DatabaseCluster, standby: PatroniNode, t0: float) -> None:
        super().__init__(daemon=True)
        self.db, self.standby, self.t0 = db, standby, t0
        self.marks: dict[str, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set() and time.monotonic() - self.t0 < 120:
            now = time.monotonic() - self.t0
            if "leader_key_gone" not in self.marks:
                status, body = self.standby.rest("/cluster")
                members = body.get("members", []) if isinstance(body, dict) else []
                if status == 200 and not any(m.get("role") == "leader" for m in members):
                    self.marks["leader_key_gone"] = now
            if "promoted" not in self.marks and self.standby.is_primary():
                self.marks["promoted"] = now
            if "promoted" in self.marks and "sync_standby" not in self.marks:
                with contextlib.suppress(psycopg.Error):  # not up yet: asked again
                    if any(s == "sync" for _, s in self.db.streaming(self.standby)):
                        self.marks["sync_standby"] = now
            time.sleep(0.02)


def one_failover(db: DatabaseCluster, store: PostgresStore, lease: Lease) -> dict[str, Any]:
    old = db.wait_healthy()
    standby = db.sync_standby()
    assert standby is not None
    seq = store.last()[0] + 1
    store.write(_rows(store, seq), fence=lease)
    t0 = time.monotonic()
    db.kill(old)
    watcher = Watcher(db, standby, t0)
    watcher.start()
    tries = 0
    while True:
        tries += 1
        try:
            store.write(_rows(store, seq + 1), fence=lease)
            break
        except LedgerUnavailable:
            if time.monotonic() - t0 > 120:
                raise
            time.sleep(0.02)
    committed = time.monotonic() - t0
    watcher.done.set()
    watcher.join(5)
    new = db.primary()
    db.restart(old)
    return {
        "killed": old.name,
        "promoted_node": None if new is None else new.name,
        "was_sync_standby": new is standby,
        "first_commit_s": round(committed, 3),
        "failed_tries": tries - 1,
        **{k: round(v, 3) for k, v in watcher.marks.items()},
    }


def bench_ha_failover(runs: int) -> dict[str, Any]:
    with database_cluster(3) as db:
        store, _ = open_store(db.database(), "link-a", AT, "bench", "new")
        assert isinstance(store, PostgresStore)
        lease = store.acquire("link-1", 60.0)
        try:
            samples = [one_failover(db, store, lease) for _ in range(runs)]
        finally:
            store.close()
    times = [s["first_commit_s"] for s in samples]
    return {
        "runs": samples,
        "first_commit_p50_s": round(statistics.median(times), 2),
        "first_commit_max_s": round(max(times), 2),
        "floor_ttl_s": settings.TTL_S,
        "ratio_p50_to_ttl": round(statistics.median(times) / settings.TTL_S, 2),
        "settings": {"ttl": settings.TTL_S, "loop_wait": settings.LOOP_WAIT_S,
                     "retry_timeout": settings.RETRY_TIMEOUT_S},
        "machine": machine(),
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ha_failover", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="failovers to measure")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    result = bench_ha_failover(args.runs)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
