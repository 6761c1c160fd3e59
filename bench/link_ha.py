"""The whole HA link under load: wagers/s through two controllers, two brokers and three
Patroni/PostgreSQL nodes replicated synchronously, against floors measured in the same run.

Why a module of its own (not a ``bench.run`` section): it needs Patroni and etcd and the
whole rig (``progressived.testing.ha.link``), and takes minutes. It measures, on the rig:

* **throughput**: ``TABLES`` protocol-level tables (one MQTT session each, as a table daemon
  keeps), each keeping ``WINDOW`` contributions of 7 wagers in flight -- a contribution is
  durable and acknowledged when its result comes, i.e. after the link's group commit was
  acknowledged by the synchronous standby. Wagers/s over ``SECONDS`` after a warm-up;
* **the ledger's own cost**: the controller's commit time in that window (its
  ``progressive_link_commit_seconds`` histogram) against a bare psycopg insert of the very
  journal and posting rows it committed, into tables with the same schema on the same
  primary, in as many transactions (synchronous replication applies to both);
* **claim -> every sign**: a claim sent by a table, to the linked meter with its hit received
  by a sign on each broker (p50, p99, max over ``CLAIMS`` claims x 2 signs);
* **RSS** of each link controller (the most seen, sampled each second).

    python -m bench.link_ha [--tables 50] [--seconds 20] [--claims 20] [--window 8]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import statistics
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomqtt
import psycopg

from progressived.link.core.messages import (
    Claim,
    ClaimConfirm,
    Contribution,
    LedgerHead,
    MeterWagers,
    Result,
    TableMessage,
    decode_link,
    encode,
    from_table_topic,
)
from progressived.storage.postgres import PostgresStore
from progressived.testing.ha.link import LINK, HaLink, LinkProcess, ha_link
from progressived.testing.ha.process import tree

PREFIX = "progressive"
METER = "pmg"
SEATS = 7
WAGER = 5_000_000  # $5 a seat, in minor units
AT = "2026-11-28T00:00:00Z"


@dataclass
class LoadTable:
    """One table: contributions of 7 wagers, ``window`` in flight, each acknowledged by its
    result; ``acked`` holds (time, wagers) per result."""

    id: str
    link: HaLink
    window: int
    seq: int = 0
    waiting: dict[int, float] = field(default_factory=dict)
    acked: list[tuple[float, int]] = field(default_factory=list)
    answers: dict[int, asyncio.Future[Result]] = field(default_factory=dict)
    client: aiomqtt.Client | None = None
    load: bool = True

    def head(self) -> LedgerHead:
        return LedgerHead(self.seq, hashlib.sha256(f"{self.id}:{self.seq}".encode()).hexdigest())

    def envelope(self) -> dict[str, Any]:
        self.seq += 1
        return {"table": self.id, "seq": self.seq, "id": f"{self.id}-{self.seq}",
                "head": self.head(), "at": AT}  # fmt: skip

    async def send(self, msg: TableMessage) -> None:
        assert self.client is not None
        self.waiting[msg.seq] = time.monotonic()
        await self.client.publish(from_table_topic(PREFIX, LINK, self.id), encode(msg), qos=1)

    async def run(self) -> None:
        broker = self.link.brokers[0]
        async with aiomqtt.Client(
            broker.host, broker.port, username=self.id, password=self.link.passwords[self.id],
            identifier=self.id, max_inflight_messages=100,
        ) as client:  # fmt: skip
            self.client = client
            await client.subscribe(f"{PREFIX}/link/{LINK}/to/{self.id}", qos=1)
            reader = asyncio.create_task(self._read(client))
            try:
                while True:
                    if self.load and len(self.waiting) < self.window:
                        wagers = (MeterWagers(METER, SEATS, SEATS * WAGER),)
                        await self.send(Contribution(**self.envelope(), round=self.seq,
                                                     wagers=wagers))  # fmt: skip
                    else:
                        await asyncio.sleep(0.002)
            finally:
                reader.cancel()

    async def _read(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            assert isinstance(message.payload, bytes)
            reply = decode_link(message.payload)
            if isinstance(reply, Result) and reply.status != "resend":
                if self.waiting.pop(reply.seq, None) is not None:
                    self.acked.append((time.monotonic(), SEATS))
                future = self.answers.pop(reply.seq, None)
                if future is not None and not future.done():
                    future.set_result(reply)


@dataclass
class Signs:
    """A sign on each broker: when each saw the linked meter with a hit, by claim table."""

    link: HaLink
    hits: list[tuple[int, str, float]] = field(default_factory=list)  # (broker, table, at)

    async def watch(self, index: int) -> None:
        broker = self.link.brokers[index]
        async with aiomqtt.Client(
            broker.host, broker.port, username="sign-lobby",
            password=self.link.passwords["sign-lobby"], identifier="sign-lobby",
        ) as client:  # fmt: skip
            await client.subscribe(f"{PREFIX}/link/{LINK}/meter/#", qos=1)
            last: Any = None
            async for message in client.messages:
                assert isinstance(message.payload, bytes)
                hit = json.loads(message.payload).get("hit")
                if hit and hit != last:
                    last = hit
                    self.hits.append((index, str(hit.get("table")), time.monotonic()))


def metric(controller: LinkProcess, name: str) -> float:
    """One sample of the controller's Prometheus text (0 when absent)."""
    url = f"http://127.0.0.1:{controller.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as page:
        for line in page.read().decode().splitlines():
            if line.startswith((name + "{", name + " ")):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def head_seq(controller: LinkProcess) -> int:
    status = controller.status()
    assert status is not None, f"{controller.holder} does not answer"
    return int(status["ledger"]["head_seq"])


def rss_mb(controller: LinkProcess) -> float:
    pid = controller.child.pid
    if pid is None:
        return 0.0
    total = 0
    for p in tree(pid)[:1]:  # the controller itself (it starts no children)
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


@dataclass
class Chunk:
    """One of the window's commits as rows again: what the ledger wrote, in the order and
    shape :class:`progressived.storage.port.Writable` gives the store."""

    journal: list[tuple[Any, ...]]
    postings: list[tuple[int, int, str, int]]
    balances: list[tuple[str, int, int]]
    keys: list[tuple[str, int, int]]
    snapshot: tuple[int, str, str] | None
    outbox: tuple[()] = ()

    @property
    def head(self) -> StoreHead:
        return StoreHead(int(self.journal[-1][0]), str(self.journal[-1][10]))


@dataclass(frozen=True)
class StoreHead:
    seq: int
    hash: str


JOURNAL_COLUMNS = (
    "seq, at, table_id, round, seat, kind, category, actor, idem_key, data, hash, prev_hash"
)


def window_chunks(
    conn: psycopg.Connection[Any], first: int, last: int, commits: int
) -> list[Chunk]:
    """The window's journal rows (with their postings, idempotency keys, the balances they
    leave and any snapshot) split into ``commits`` chunks of equal size."""
    span = (first, last)
    rows = conn.execute(f"SELECT {JOURNAL_COLUMNS} FROM journal WHERE seq BETWEEN %s AND %s "
                        "ORDER BY seq", span).fetchall()  # fmt: skip
    legs = conn.execute("SELECT seq, leg, account, units FROM postings WHERE seq BETWEEN %s "
                        "AND %s ORDER BY seq, leg", span).fetchall()  # fmt: skip
    keys = conn.execute("SELECT key, first_seq, last_seq FROM idempotency WHERE first_seq "
                        "BETWEEN %s AND %s", span).fetchall()  # fmt: skip
    snaps = conn.execute("SELECT seq, hash, state FROM snapshots WHERE seq BETWEEN %s AND %s",
                         span).fetchall()  # fmt: skip
    conn.commit()
    legs_of: dict[int, list[tuple[int, int, str, int]]] = {}
    for leg in legs:
        legs_of.setdefault(int(leg[0]), []).append(leg)
    keys_of: dict[int, list[tuple[str, int, int]]] = {}
    for key in keys:
        keys_of.setdefault(int(key[1]), []).append(key)
    snap_of = {int(s[0]): s for s in snaps}
    per = max(1, -(-len(rows) // max(commits, 1)))
    running: dict[str, int] = {}
    chunks = []
    for i in range(0, len(rows), per):
        part = rows[i : i + per]
        seqs = [int(r[0]) for r in part]
        mine = [leg for q in seqs for leg in legs_of.get(q, [])]
        touched: dict[str, int] = {}
        for q, _leg, account, units in mine:
            running[account] = running.get(account, 0) + int(units)
            touched[account] = q
        balances = [(a, running[a], q) for a, q in touched.items()]
        snap = next((snap_of[q] for q in seqs if q in snap_of), None)
        chunks.append(
            Chunk(part, mine, balances, [k for q in seqs for k in keys_of.get(q, [])], snap)
        )
    return chunks


def like_for_like(link: HaLink, first: int, last: int, commits: int) -> tuple[float, float]:
    """Seconds for the ledger's own write path (:meth:`PostgresStore.write` with the fence)
    and for a bare psycopg insert of the journal and posting rows alone, of the window's rows
    in as many transactions, chunk by chunk alternately, on the same primary after the
    stream stopped: both under the same conditions, so their ratio is the ledger's cost."""
    url = link.ledger_url()
    with psycopg.connect(url) as conn:
        conn.execute("DROP SCHEMA IF EXISTS bench_ledger CASCADE")
        conn.execute("CREATE SCHEMA bench_ledger")
        conn.execute("DROP TABLE IF EXISTS bare_postings, bare_journal")
        conn.execute("CREATE TABLE bare_journal (LIKE journal INCLUDING ALL)")
        conn.execute("CREATE TABLE bare_postings (LIKE postings INCLUDING ALL)")
        conn.commit()
        chunks = window_chunks(conn, first, last, commits)
        store = PostgresStore.open(f"{url}&options=-c%20search_path%3Dbench_ledger", "new",
                                   "bench", AT, "bench")  # fmt: skip
        try:
            lease = store.acquire("bench", 60)
            width = len(chunks[0].journal[0]) if chunks else 0
            insert = (
                f"INSERT INTO bare_journal ({JOURNAL_COLUMNS}) VALUES ({', '.join(['%s'] * width)})"
            )
            ledger_s = bare_s = 0.0
            for chunk in chunks:
                started = time.perf_counter()
                store.write(chunk, fence=lease)
                ledger_s += time.perf_counter() - started
                started = time.perf_counter()
                with conn.cursor() as cur:
                    cur.executemany(insert, chunk.journal)
                    if chunk.postings:
                        cur.executemany("INSERT INTO bare_postings (seq, leg, account, units) "
                                        "VALUES (%s, %s, %s, %s)", chunk.postings)  # fmt: skip
                conn.commit()
                bare_s += time.perf_counter() - started
        finally:
            store.close()
        return ledger_s, bare_s


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(tables: int, seconds: float, claims: int, window: int) -> dict[str, Any]:
    ids = [f"t-{i:02d}" for i in range(tables)]
    with ha_link(ids, meter=METER, lease_s=20) as link:
        active = link.wait_active()
        signs = Signs(link)
        watchers = [asyncio.create_task(signs.watch(i)) for i in range(2)]
        load = [LoadTable(t, link, window) for t in ids]
        runs = [asyncio.create_task(t.run()) for t in load]
        rss: dict[str, float] = {c.holder: 0.0 for c in link.controllers}
        try:
            await asyncio.sleep(5)  # warm-up
            head0 = head_seq(active)
            c0 = metric(active, "progressive_link_commit_seconds_sum")
            n0 = metric(active, "progressive_link_commit_seconds_count")
            start = time.monotonic()
            while time.monotonic() - start < seconds:
                await asyncio.sleep(1)
                for c in link.controllers:
                    rss[c.holder] = max(rss[c.holder], rss_mb(c))
            end = time.monotonic()
            head1 = head_seq(active)
            c1 = metric(active, "progressive_link_commit_seconds_sum")
            n1 = metric(active, "progressive_link_commit_seconds_count")
            wagers = sum(w for t in load for at, w in t.acked if start <= at < end)
            for t in load:
                t.load = False
            await asyncio.sleep(2)  # the window drains
            latencies: list[float] = []
            for k in range(claims):
                table = load[k % tables]
                future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
                claim = Claim(**table.envelope(), claim=f"{table.id}-c{table.seq}", round=table.seq,
                              seat=1, hand="royal-flush", meter=METER)  # fmt: skip
                table.answers[claim.seq] = future
                heard = len(signs.hits)
                sent = time.monotonic()
                await table.send(claim)
                await asyncio.wait_for(future, 30)
                deadline = time.monotonic() + 30
                while len([h for h in signs.hits[heard:] if h[1] == table.id]) < 2:
                    assert time.monotonic() < deadline, "a sign never saw the hit"
                    await asyncio.sleep(0.001)
                latencies += [at - sent for _, tid, at in signs.hits[heard:] if tid == table.id]
                confirm = ClaimConfirm(**table.envelope(), claim=claim.claim, by="sup")
                done: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
                table.answers[confirm.seq] = done
                await table.send(confirm)
                await asyncio.wait_for(done, 30)
        finally:
            for task in [*runs, *watchers]:
                task.cancel()
        ledger_s, bare_s = await asyncio.to_thread(
            like_for_like, link, head0 + 1, head1, int(n1 - n0)
        )
    commit_s = c1 - c0
    return {
        "tables": tables,
        "window": window,
        "seconds": round(end - start, 1),
        "wagers_per_s": round(wagers / (end - start)),
        "rows": head1 - head0,
        "commits": int(n1 - n0),
        "rows_per_commit": round((head1 - head0) / max(n1 - n0, 1), 1),
        "commit_under_load_s": round(commit_s, 3),
        "ledger_write_s": round(ledger_s, 3),
        "bare_insert_s": round(bare_s, 3),
        "ledger_cost_ratio": round(ledger_s / bare_s, 2) if bare_s else None,
        "claim_to_every_sign_ms": {
            "n": len(latencies),
            "p50": round(statistics.median(latencies) * 1000, 1),
            "p99": round(pct(latencies, 0.99) * 1000, 1),
            "max": round(max(latencies) * 1000, 1),
        },
        "controller_rss_mb": {k: round(v, 1) for k, v in rss.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.link_ha")
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--claims", type=int, default=20)
    parser.add_argument("--window", type=int, default=8)
    args = parser.parse_args()
    result = asyncio.run(measure(args.tables, args.seconds, args.claims, args.window))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
