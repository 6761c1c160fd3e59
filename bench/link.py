"""The ``link`` section: the link controller as tables and signs see it, through a real broker.

* **throughput** — ``tables`` simulated member tables (one MQTT client each, user name = the
  table id, as on the floor) send contributions (7 wagers each, one per LOCK) with a few in
  flight; a wager counts once the link's ``applied`` result for its message is back at the
  table, i.e. after the link journaled it durably (group commit) and answered. Sustained
  for ``seconds``; reported per second over the whole window.
* **claim to sign** — a table publishes a claim; the time until *every* one of ``signs``
  subscribers to the linked meter's retained topic has received the meter message naming
  that table's hit. p50/p99/max over ``claims`` claims (each then confirmed).
* **RSS** — the link controller's resident memory (``/proc/PID/status`` VmRSS), sampled every
  0.25 s over both phases; the maximum is reported.
* **message -> answer budget** — each answered message of the throughput window, stage by
  stage (receive, decode, book, commit, queue, answer), from the controller's ``link batch``
  spans (it runs at log level debug) and the tables' send and answer times, each stage
  beside its floor (bench/link_budget.py).

The link controller runs as its own process (``progressived link --config``), after
``progressived init`` made its ledger, exactly as an operator starts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomqtt

from bench.link_budget import Answer, budget, micro_floors
from bench.measure import summary_ms
from progressived.core.money import UNITS_PER_DOLLAR
from progressived.link.core.messages import (
    Claim,
    ClaimConfirm,
    Contribution,
    Heartbeat,
    LedgerHead,
    MeterWagers,
    Result,
    TableMessage,
    decode_link,
    encode,
    from_table_topic,
    meter_topic,
    to_table_topic,
)
from progressived.mqtt.config import NO_DELAY
from progressived.testing.broker import Mosquitto
from progressived.testing.config import render_toml

LINK, METER, PREFIX = "link-a", "main", "progressive"
PROGRESSIVED = [sys.executable, "-m", "progressived.cli.daemon"]
SEATS = 7  # wagers per contribution: a full table locking
# The link's broker as docs/link.md configures it: room for the bursts of 50 tables
# (progressived.testing.broker.Mosquitto already sets set_tcp_nodelay, as docs/mqtt.md advises).
BROKER_CONFIG = "max_queued_messages 10000\n"


def write_link_config(tmp: Path, port: int, tables: list[str]) -> Path:
    path = tmp / "link.toml"
    sections: dict[str, Any] = {
        "link": {"id": LINK, "tables": "@TABLES@", "heartbeat_s": 1.0},
        "link.meters": [{"id": METER, "paytable": "pmg-01", "rate": 0.15, "reserve_rate": 0.02}],
        "mqtt": {"host": "127.0.0.1", "port": port},
        "ledger": {"path": tmp / "link.db"},
        "metrics": {"port": 0},
        "control": {"socket": tmp / "link.sock"},
        # debug: the controller's ``link batch`` spans (one line per batch) for the budget
        "log": {"format": "json", "level": "debug"},
    }
    text = render_toml(sections, "# bench/link.py")
    path.write_text(text.replace('"@TABLES@"', json.dumps(tables)))
    return path


def rss_kib(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@dataclass
class SimTable:
    """A member table as the link sees it: gapless sequences, heads that move forward."""

    id: str
    client: aiomqtt.Client
    seq: int = 0
    acked: int = 0  # wagers whose contribution the link applied
    in_flight: dict[int, bytes] = field(default_factory=dict)
    results: dict[int, asyncio.Future[Result]] = field(default_factory=dict)
    sent_at: dict[int, float] = field(default_factory=dict)  # seq -> first sent (wall clock)
    answers: list[Answer] = field(default_factory=list)  # (sent, answered, lseq): the budget

    def envelope(self) -> dict[str, Any]:
        self.seq += 1
        digest = hashlib.sha256(f"{self.id}:{self.seq}".encode()).hexdigest()
        return {
            "table": self.id,
            "seq": self.seq,
            "id": f"{self.id}:{self.seq}",
            "head": LedgerHead(self.seq, digest),
            "at": "2026-11-23T00:00:00Z",
        }

    async def send(self, msg: TableMessage) -> asyncio.Future[Result]:
        payload = encode(msg)
        self.in_flight[msg.seq] = payload
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self.results[msg.seq] = future
        self.sent_at[msg.seq] = time.time()
        await self.client.publish(from_table_topic(PREFIX, LINK, self.id), payload, qos=1)
        return future

    async def resend_from(self, start: int) -> None:
        for seq in sorted(s for s in self.in_flight if s >= start):
            topic = from_table_topic(PREFIX, LINK, self.id)
            await self.client.publish(topic, self.in_flight[seq], qos=1)

    async def listen(self) -> None:
        async for message in self.client.messages:
            payload = message.payload
            if not isinstance(payload, (bytes, bytearray)):
                continue
            reply = decode_link(bytes(payload))
            if isinstance(reply, Heartbeat):
                if self.in_flight and reply.expect <= min(self.in_flight):
                    await self.resend_from(reply.expect)
            elif isinstance(reply, Result):
                if reply.status == "resend":
                    await self.resend_from(reply.resend_from)
                    continue
                self.in_flight.pop(reply.seq, None)
                sent = self.sent_at.pop(reply.seq, None)
                if sent is not None and reply.lseq:
                    self.answers.append((sent, time.time(), reply.lseq))
                future = self.results.pop(reply.seq, None)
                if future is not None and not future.done():
                    future.set_result(reply)


async def _pump(
    tables: list[SimTable], seconds: float, window: int, started: Callable[[], None]
) -> None:
    """Each table keeps ``window`` contributions in flight until ``seconds`` have passed."""
    deadline = time.perf_counter() + seconds

    async def one(t: SimTable) -> None:
        pending: set[asyncio.Future[Result]] = set()
        rnd = 0
        while time.perf_counter() < deadline:
            while len(pending) < window:
                rnd += 1
                msg = Contribution(
                    **t.envelope(),
                    round=rnd,
                    wagers=(MeterWagers(METER, SEATS, SEATS * UNITS_PER_DOLLAR),),
                )
                pending.add(await t.send(msg))
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                if future.result().status == "applied":
                    t.acked += SEATS

    started()
    await asyncio.gather(*(one(t) for t in tables))


Seen = asyncio.Queue[tuple[float, dict[str, Any]]]


async def watch_sign(client: aiomqtt.Client, out: Seen) -> None:
    """A sign: every linked meter message, with the time it arrived (decoded, as signs do)."""
    async for message in client.messages:
        if isinstance(message.payload, (bytes, bytearray)):
            out.put_nowait((time.perf_counter(), json.loads(message.payload)))


async def _claims(tables: list[SimTable], seen: list[Seen], count: int) -> list[float]:
    """Claim -> every sign shows the winning table's hit; seconds each. The signs have been
    reading all along (the throughput phase's meter updates included)."""
    times: list[float] = []
    for index in range(count):
        t = tables[index % len(tables)]
        claim_id = f"c{t.seq + 1}"
        msg = Claim(
            **t.envelope(),
            claim=claim_id,
            round=10_000 + index,
            seat=1 + index % SEATS,
            hand="royal-flush",
            meter=METER,
        )
        for q in seen:  # older meter messages do not count
            while not q.empty():
                q.get_nowait()
        sent = time.perf_counter()
        result = await t.send(msg)
        last = sent
        for q in seen:
            while True:
                at, data = await asyncio.wait_for(q.get(), 10)
                hit = data.get("hit") or {}
                if hit.get("table") == t.id and hit.get("seat") == msg.seat:
                    last = max(last, at)
                    break
        times.append(last - sent)
        await asyncio.wait_for(result, 10)
        confirm = ClaimConfirm(**t.envelope(), claim=claim_id, by="bench-sup")
        await asyncio.wait_for(await t.send(confirm), 10)
    return times


async def _with_tables(
    broker: Mosquitto, ids: list[str], body: Callable[[list[SimTable]], Awaitable[Any]]
) -> Any:
    async with contextlib.AsyncExitStack() as stack:
        tables = []
        for table in ids:
            client = aiomqtt.Client(
                broker.host,
                broker.port,
                identifier=table,
                username=table,
                socket_options=NO_DELAY,  # as the table daemon's link client
            )
            await stack.enter_async_context(client)
            await client.subscribe(to_table_topic(PREFIX, LINK, table), qos=1)
            tables.append(SimTable(table, client))
        listeners = [asyncio.create_task(t.listen()) for t in tables]
        try:
            return await body(tables)
        finally:
            for task in listeners:
                task.cancel()


async def bench_link(
    tmp: Path,
    *,
    tables: int = 50,
    seconds: float = 60.0,
    claims: int = 200,
    signs: int = 5,
    floor: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The section's figures; ``floor``: the same run's floor section, whose bare SQLite
    commit and MQTT QoS 1 delivery are the floors of the budget's commit, receive and
    answer stages."""
    ids = [f"t-{i:02d}" for i in range(tables)]
    with Mosquitto(extra_config=BROKER_CONFIG) as broker:
        config = write_link_config(tmp, broker.port, ids)
        subprocess.run(
            [*PROGRESSIVED, "init", "--config", str(config)], check=True, capture_output=True
        )
        log = (tmp / "link.log").open("wb")
        # BENCH_LINK_PROFILE=FILE runs the controller under cProfile (not for the record).
        profile = os.environ.get("BENCH_LINK_PROFILE")
        prof = ["-m", "cProfile", "-o", profile] if profile else []
        proc = subprocess.Popen(
            [*PROGRESSIVED[:1], *prof, *PROGRESSIVED[1:], "link", "--config", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        rss: list[int] = []
        sampling = True

        async def sample() -> None:
            while sampling:
                rss.append(rss_kib(proc.pid))
                await asyncio.sleep(0.25)

        sampler = asyncio.create_task(sample())
        try:
            async with contextlib.AsyncExitStack() as stack:
                seen: list[Seen] = []
                for index in range(signs):
                    client = aiomqtt.Client(broker.host, broker.port, identifier=f"sign-{index}")
                    await stack.enter_async_context(client)
                    await client.subscribe(meter_topic(PREFIX, LINK, METER), qos=1)
                    seen.append(asyncio.Queue())
                    task = asyncio.create_task(watch_sign(client, seen[-1]))
                    stack.callback(task.cancel)
                window = {"start": 0.0}
                answers: list[Answer] = []

                async def throughput(ts: list[SimTable]) -> dict[str, Any]:
                    await _pump(ts[:1], 2.0, 2, lambda: None)  # the link is up and answering
                    for t in ts:
                        t.acked = 0
                        t.answers.clear()
                    await _pump(ts, seconds, 4, lambda: window.update(start=time.perf_counter()))
                    elapsed = time.perf_counter() - window["start"]
                    acked = sum(t.acked for t in ts)
                    answers.extend(a for t in ts for a in t.answers)
                    return {
                        "tables": len(ts),
                        "seconds": round(elapsed, 2),
                        "wagers": acked,
                        "wagers_per_s": round(acked / elapsed),
                    }

                async def both(ts: list[SimTable]) -> dict[str, Any]:
                    out = {"throughput": await throughput(ts)}
                    out["claim_to_sign"] = summary_ms(await _claims(ts, seen, claims))
                    return out

                result: dict[str, Any] = await _with_tables(broker, ids, both)
        finally:
            sampling = False
            await sampler
            proc.terminate()
            proc.wait(timeout=20)
            log.close()
        result["link_rss_max_mib"] = round(max(rss, default=0) / 1024, 1)
        # per stage, with the in-process floors; bench.run adds the floor section's
        floors: dict[str, Any] = dict(micro_floors())
        if floor is not None:
            floors.update(commit=floor["sqlite_commit"], receive=floor["mqtt_qos1_round_trip"],
                          answer=floor["mqtt_qos1_round_trip"])
        text = (tmp / "link.log").read_text(errors="replace")
        result["message_to_answer_budget"] = budget(text, answers, floors)
        result["signs"] = signs
        return result
