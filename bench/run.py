"""The benchmark harness: ``.venv/bin/python -m bench.run [--quick] [--out FILE]``.

Measures, on this machine, in one run (see docs/performance.md for definitions/targets):

* floor       — a bare SQLite WAL + synchronous=FULL commit plus a bare MQTT QoS 1 round
                trip (publish -> a second client receives), per sample;
* latency     — key-to-sign: a key-press frame written to the board pty -> the award / event
                message received by an independent MQTT subscriber (the daemon journals and
                fsyncs before its outbox publishes); p50/p99/max, and the ratio to the floor;
                and key-to-meter: LOCK -> the meter message (the topic signs read), with
                LOCK pressed 20 ms, 0.35 s and 1.2 s after the last bet change;
* throughput  — durable linked contributions per second (``LinkedWagers`` decided by the
                engine, journaled with ``Ledger.append_many``) against a bare sqlite3 insert
                of the same rows into the same schema under the same pragmas; the ledger's
                own cost is the time inside ``append_many`` (``append_ratio``);
* memory      — RSS of the engine+ledger loop after start and every 10,000 rounds up to
                100,000 rounds (a child process); also the daemon's RSS around the latency run;
* startup     — daemon start -> READY on a ledger of >= 1,000,000 events (the memory loop's
                ledger), and ``progressivectl ledger verify`` on it against its floor (one
                pass reading every journal row and hashing it; bench/verify.py);
* idle        — the daemon's CPU time over a 60 s idle window (board heartbeats only).

``--quick`` uses tiny counts (a smoke run, well under a minute); the figures are then not
comparable with the targets. ``--only a,b`` runs some sections.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import aiomqtt

from bench.stress import utc_now
from bench.table import Table, cpu_seconds, rss_bytes, table
from bench.verify import bench_verify
from progressived.broker import Mosquitto
from progressived.engine import LinkedWagers, decide
from progressived.ledger import Batch, Ledger
from progressived.params import MeterParams, TableParams
from progressived.paytable import find_paytable

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("floor", "latency", "throughput", "memory", "startup", "idle")
MB = 1024 * 1024


@dataclass(frozen=True)
class Counts:
    floor: int = 1000
    presses: int = 1000
    wagers: int = 100_000
    group: int = 1000
    rounds: int = 100_000
    every: int = 10_000
    events: int = 1_000_000
    idle_s: float = 60.0


QUICK = Counts(
    floor=50, presses=36, wagers=5000, group=500, rounds=300, every=100, events=5000, idle_s=2.0
)


# ---------------------------------------------------------------------------- helpers


def pct(values: Sequence[float], p: float) -> float:
    """The p-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    rank = max(1, round(p / 100 * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


def summary_ms(samples: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(samples),
        "p50_ms": round(pct(samples, 50) * 1000, 3),
        "p99_ms": round(pct(samples, 99) * 1000, 3),
        "max_ms": round(max(samples) * 1000, 3),
        "mean_ms": round(statistics.fmean(samples) * 1000, 3),
    }


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    sqlite_fs = ""
    with contextlib.suppress(OSError, IndexError):
        sqlite_fs = subprocess.run(
            ["df", "-T", tempfile.gettempdir()], capture_output=True, text=True, check=False
        ).stdout.splitlines()[-1].split()[1]
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "kernel": platform.release(),
        "tmp_fs": sqlite_fs,
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def linked_params() -> TableParams:
    """The linked meter's controller: same meter rates as the bench table."""
    return TableParams(
        table_id="bench-linked",
        paytable=find_paytable("tcp-sd-1"),
        meters=(MeterParams(rate=Fraction(15, 100), reserve_rate=Fraction(5, 100)),),
    )


# ---------------------------------------------------------------------------- floor


async def mqtt_round_trips(broker: Mosquitto, n: int) -> list[float]:
    """Publish QoS 1 (waits for PUBACK) -> a second client receives it; seconds each."""
    times: list[float] = []
    async with (
        aiomqtt.Client(broker.host, broker.port, identifier="floor-sub") as sub,
        aiomqtt.Client(broker.host, broker.port, identifier="floor-pub") as pub,
    ):
        await sub.subscribe("bench/floor", qos=1)
        await asyncio.sleep(0.1)
        messages = sub.messages
        for i in range(n):
            started = time.perf_counter()
            await pub.publish("bench/floor", str(i).encode(), qos=1)
            async with asyncio.timeout(10):
                async for message in messages:
                    if message.payload == str(i).encode():
                        break
            times.append(time.perf_counter() - started)
    return times


def sqlite_commits(path: Path, n: int) -> list[float]:
    """One small row per ``BEGIN IMMEDIATE .. COMMIT`` under WAL + synchronous=FULL."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, at TEXT, data TEXT)")
    times: list[float] = []
    data = json.dumps({"kind": "hand_keyed", "seat": 3, "units": 600_000})
    for _ in range(n):
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (at, data) VALUES (?, ?)", (utc_now(), data))
        conn.execute("COMMIT")
        times.append(time.perf_counter() - started)
    conn.close()
    return times


async def bench_floor(tmp: Path, n: int) -> dict[str, Any]:
    commits = sqlite_commits(tmp / "floor.db", n)
    with Mosquitto() as broker:
        trips = await mqtt_round_trips(broker, n)
    total = [a + b for a, b in zip(commits, trips, strict=True)]
    return {
        "sqlite_commit": summary_ms(commits),
        "mqtt_qos1_round_trip": summary_ms(trips),
        "floor": summary_ms(total),
    }


# ---------------------------------------------------------------------------- latency

# One round: (key, the event kind whose arrival ends the measurement). S keys only select
# a seat and publish nothing, so they are pressed but not measured.
ROUND: list[tuple[str, str | None]] = [
    ("LOCK", "round_locked"),
    ("S1", None),
    ("H5", "hand_keyed"),  # a straight, paid from the tray
    ("S2", None),
    ("H4", "hand_keyed"),  # three of a kind
    ("S3", None),
    ("H1", "award_keyed"),  # the AKQ of spades: the meter award
    ("OK", "award_confirmed"),  # the supervisor confirms
    ("RECON", "round_reconciled"),
]
MEASURED_PER_ROUND = sum(1 for _, kind in ROUND if kind)
# LOCK pressed this long after the last bet change (round by round, in turn): a sign's meter
# must not wait behind messages the bet change caused.
LOCK_DELAYS_S = (0.02, 0.35, 1.2)
# A round here takes well under a second (a real one takes a minute): rounds start at least
# this long after the previous LOCK, so that the meter's rate window (default 4 messages in
# any second; a round changes the meter three times) is not what the figures measure.
ROUND_PACE_S = 1.0


def set_bets(t: Table, seats: set[int]) -> None:
    """All bet sensors at once: one STATE frame (``supervisor`` resends the state)."""
    t.sim.present = set(seats)
    t.sim.supervisor(t.sim.supervisor_on)


def is_meter(topic: str) -> bool:
    """A meter topic (``.../meter/<id>``), whatever prefix or table level it has."""
    parts = topic.split("/")
    return len(parts) >= 2 and parts[-2] == "meter"


def _meter_above(cents: int) -> Callable[[str, dict[str, Any]], bool]:
    """Accepts the first meter message showing more than ``cents`` (LOCK's contributions)."""

    def test(topic: str, message: dict[str, Any]) -> bool:
        return is_meter(topic) and int(message.get("cents", 0)) > cents

    return test


def _last_meter_cents(t: Table) -> int:
    for topic, message, _ in reversed(t.sub.messages):
        if is_meter(topic):
            return int(message.get("cents", 0))
    return 0


def _event_after(kind: str, last: int) -> Callable[[str, dict[str, Any]], bool]:
    """Accepts the first ``kind`` event journaled after ``seq`` ``last``."""

    def test(topic: str, message: dict[str, Any]) -> bool:
        return (
            topic.endswith("/event")
            and message.get("kind") == kind
            and int(message.get("seq", 0)) > last
        )

    return test


async def reset_round(t: Table) -> None:
    """After a press that got no message: reject any award, reconcile, clear the keypad."""
    t.sim.supervisor(True)
    await asyncio.sleep(0.1)
    for code in ("NO", "CLR"):
        t.sim.press(code)
        await asyncio.sleep(0.1)
    t.sim.supervisor(False)
    set_bets(t, set())
    await asyncio.sleep(0.1)
    for code in ("RECON", "CLR"):
        t.sim.press(code)
        await asyncio.sleep(0.2)


async def bench_latency(tmp: Path, presses: int, profile: Path | None = None) -> dict[str, Any]:
    rounds = -(-presses // MEASURED_PER_ROUND)
    samples: dict[str, list[float]] = {}
    timeouts: list[dict[str, Any]] = []
    async with table(tmp, profile=profile) as t:
        t.start_daemon()
        await t.online()
        await asyncio.sleep(1.0)
        rss_start = rss_bytes(t.pid)
        seen_seqs: list[int] = []
        meter_samples: dict[str, list[float]] = {f"{d:g}": [] for d in LOCK_DELAYS_S}
        # LOCK presses (wall clock) and their meter's arrival (perf_counter), for the split
        lock_walls: list[float] = []
        lock_meter_at: list[float] = []
        last_lock = 0.0
        for n in range(rounds):
            delay = LOCK_DELAYS_S[n % len(LOCK_DELAYS_S)]
            await asyncio.sleep(max(0.0, last_lock + ROUND_PACE_S - delay - time.perf_counter()))
            set_bets(t, {1, 2, 3})
            await asyncio.sleep(delay)
            for code, kind in ROUND:
                if code == "S1":
                    set_bets(t, set())  # the dealer collects the locked wagers
                    await asyncio.sleep(0.05)
                if code == "OK":
                    t.sim.supervisor(True)
                    await asyncio.sleep(0.05)
                if kind is None:
                    t.sim.press(code)
                    await asyncio.sleep(0.01)
                    continue
                fut = t.sub.expect(_event_after(kind, max(seen_seqs, default=0)))
                meter_fut = None
                if code == "LOCK":
                    meter_fut = t.sub.expect(_meter_above(_last_meter_cents(t)))
                started = time.perf_counter()
                t.sim.press(code)
                if code == "LOCK":
                    last_lock = started
                    lock_walls.append(time.time())
                try:
                    async with asyncio.timeout(5):
                        arrived = await fut
                        if meter_fut is not None:
                            lock_meter_at.append(await meter_fut)
                            meter_samples[f"{delay:g}"].append(lock_meter_at[-1] - started)
                except TimeoutError:
                    # Reported, not hidden: the press, and why the daemon refused it.
                    lines = [
                        line for line in t.log_text().splitlines()
                        if "rejected" in line or "refused" in line or "error" in line
                    ]
                    timeouts.append({"key": code, "log": lines[-3:]})
                    if len(timeouts) > 10:
                        raise RuntimeError(f"too many lost presses: {timeouts}") from None
                    await reset_round(t)
                    break
                samples.setdefault(code, []).append(arrived - started)
                seen_seqs.append(max(int(m.get("seq", 0)) for _, m, _ in t.sub.messages[-20:]))
                if code == "OK":
                    t.sim.supervisor(False)
                    await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)
        split = _lock_split(t.log_text(), lock_walls, lock_meter_at) if not timeouts else {}
        rss_end = rss_bytes(t.pid)
        pid = t.pid
        assert t.stop_daemon() == 0
    # Everything the sign got was in the journal (the outbox publishes only committed rows).
    conn = sqlite3.connect(f"file:{tmp / 'ledger.db'}?mode=ro", uri=True)
    head = conn.execute("SELECT max(seq) FROM journal").fetchone()[0]
    conn.close()
    received = [int(m["seq"]) for topic, m, _ in t.sub.messages if topic.endswith("/event")]
    all_samples = [s for values in samples.values() for s in values]
    all_meter = [s for values in meter_samples.values() for s in values]
    return {
        "rounds": rounds,
        "key_to_sign": summary_ms(all_samples),
        "lock_to_meter": summary_ms(all_meter),
        "lock_to_meter_by_delay_s": {
            d: summary_ms(values) for d, values in meter_samples.items() if values
        },
        "lock_split": split,
        "meter_messages": sum(1 for topic, _, _ in t.sub.messages if is_meter(topic)),
        "meter_repeats": _meter_repeats(t),
        "presses_without_message": timeouts,
        "by_key": {code: summary_ms(values) for code, values in samples.items()},
        "daemon_pid": pid,
        "daemon_rss_mb": {
            "after_start": round(rss_start / MB, 1),
            "after_rounds": round(rss_end / MB, 1),
        },
        "max_seq_received": max(received),
        "journal_head": head,
        "received_all_in_journal": max(received) <= head,
    }


def _lock_split(
    log_text: str, pressed: Sequence[float], meter_at: Sequence[float]
) -> dict[str, Any]:
    """LOCK's path in two: press -> the daemon's ``event round_locked`` log line (written
    right after the COMMIT returned; board frame, decision, journal and fsync) and that line
    -> the meter at the sign (publish, broker, subscriber). Wall clocks of one machine."""
    offset = time.time() - time.perf_counter()
    logged: list[float] = []
    for line in log_text.splitlines():
        if '"round_locked"' not in line or '"event": "event"' not in line:
            continue
        entry = json.loads(line[line.index("{") :])
        logged.append(datetime.fromisoformat(entry["timestamp"]).timestamp())
    if len(logged) != len(pressed) or len(meter_at) != len(pressed):
        return {"error": f"{len(pressed)} presses, {len(logged)} log lines, {len(meter_at)} meters"}
    return {
        "press_to_journaled": summary_ms([b - a for a, b in zip(pressed, logged, strict=True)]),
        "journaled_to_meter": summary_ms(
            [m + offset - b for b, m in zip(logged, meter_at, strict=True)]
        ),
    }


def _meter_repeats(t: Table) -> int:
    """Meter messages showing what the previous one showed (same cents and state)."""
    shown = [
        (topic, m.get("cents"), m.get("state")) for topic, m, _ in t.sub.messages if is_meter(topic)
    ]
    return sum(1 for a, b in itertools.pairwise(shown) if a == b)


# ---------------------------------------------------------------------------- throughput


_JOURNAL_COLUMNS = (
    "seq, at, table_id, round, seat, kind, category, actor, idem_key, data, hash, prev_hash"
)


def _bare_copy(ledger_db: Path, bare_db: Path) -> sqlite3.Connection:
    """A fresh database with the ledger's tables and indexes, under the same pragmas."""
    src = sqlite3.connect(f"file:{ledger_db}?mode=ro", uri=True)
    ddl = [
        sql
        for (sql,) in src.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
            "ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, rowid"
        )
    ]
    src.close()
    conn = sqlite3.connect(bare_db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    for sql in ddl:
        if "TRIGGER" in sql.upper().split("(")[0]:
            continue  # append-only guards fire on UPDATE/DELETE only; keep inserts bare
        conn.execute(sql)
    return conn


def bench_throughput(tmp: Path, wagers: int, group: int) -> dict[str, Any]:
    """Each group of wagers is journaled by the ledger, then its rows (read back from the
    ledger, untimed) are inserted bare in one transaction: ledger and floor run
    interleaved, group by group, so that the machine's load drifts over both alike."""
    db = tmp / "linked.db"
    params = linked_params()
    at = utc_now()
    decide_s = append_s = bare_s = 0.0
    rows = postings_n = 0
    with Ledger.open(db, params, at=at, software="bench") as ledger:
        first_seq = ledger.head_seq + 1
        bare = _bare_copy(db, tmp / "bare.db")
        src = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        state = ledger.state
        batches: list[Batch] = []

        def flush() -> None:
            nonlocal append_s, bare_s, rows, postings_n
            after = ledger.head_seq
            started = time.perf_counter()
            ledger.append_many(batches)
            append_s += time.perf_counter() - started
            journal = src.execute(
                f"SELECT {_JOURNAL_COLUMNS} FROM journal WHERE seq > ? ORDER BY seq", (after,)
            ).fetchall()
            legs = src.execute(
                "SELECT seq, leg, account, units FROM postings WHERE seq > ? ORDER BY seq, leg",
                (after,),
            ).fetchall()
            keys = src.execute(
                "SELECT key, first_seq, last_seq FROM idempotency WHERE first_seq > ?", (after,)
            ).fetchall()
            rows, postings_n = rows + len(journal), postings_n + len(legs)
            started = time.perf_counter()
            bare.execute("BEGIN IMMEDIATE")
            bare.executemany(
                f"INSERT INTO journal ({_JOURNAL_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                journal,
            )
            bare.executemany("INSERT INTO postings (seq, leg, account, units) VALUES (?, ?, ?, ?)",
                             legs)
            bare.executemany("INSERT INTO idempotency (key, first_seq, last_seq) VALUES (?, ?, ?)",
                             keys)
            bare.execute("COMMIT")
            bare_s += time.perf_counter() - started
            batches.clear()

        for i in range(wagers):
            cid = f"bench-2:{i}"
            started = time.perf_counter()
            decision = decide(
                params, state, LinkedWagers(source_table="bench-2", count=1, contribution_id=cid,
                                            at=at, actor="link")
            )
            if not decision.accepted:
                raise RuntimeError(decision.reason)
            state = decision.state
            batches.append(Batch(decision.events, state, at, "link", cid))
            decide_s += time.perf_counter() - started
            if len(batches) >= group:
                flush()
        if batches:
            flush()
        last_seq = ledger.head_seq
        src.close()
        bare.close()
    assert last_seq - first_seq + 1 == wagers == rows
    ledger_s = decide_s + append_s
    return {
        "wagers": wagers,
        "group": group,
        "journal_rows": rows,
        "posting_rows": postings_n,
        "decide_s": round(decide_s, 3),
        "ledger_s": round(ledger_s, 3),
        "ledger_per_s": round(wagers / ledger_s),
        "bare_sqlite_s": round(bare_s, 3),
        "bare_sqlite_per_s": round(wagers / bare_s),
        "ratio": round(ledger_s / bare_s, 2),
        "append_s": round(append_s, 3),
        "append_ratio": round(append_s / bare_s, 2),
    }


# ---------------------------------------------------------------------------- memory + ledger


def bench_memory(tmp: Path, config: Path, rounds: int, every: int, events: int) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable, "-m", "bench.memloop", "--config", str(config),
            "--rounds", str(rounds), "--every", str(every), "--events", str(events),
        ],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=3600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bench.memloop failed:\n{proc.stderr[-3000:]}")
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    samples = [x for x in lines if not x.get("topped_up")]
    rss = [x["rss"] for x in samples]
    steady = rss[1:] or rss
    return {
        "process": "engine+ledger loop (bench.memloop: decide + Ledger.append_many, group 64)",
        "rounds": samples[-1]["rounds"],
        "rounds_s": samples[-1]["seconds"],
        "rss_mb_after_start": round(rss[0] / MB, 1),
        "rss_mb_after_rounds": round(rss[-1] / MB, 1),
        "rss_mb_by_rounds": {str(x["rounds"]): round(x["rss"] / MB, 1) for x in samples},
        "growth_mb_after_first_sample": round((max(steady) - steady[0]) / MB, 1),
        "ledger_events": lines[-1]["head"],
        "ledger_mb": round(Path(_ledger_path(config)).stat().st_size / MB, 1),
    }


def _ledger_path(config: Path) -> str:
    for line in config.read_text().splitlines():
        if line.startswith("path = "):
            return line.split("=", 1)[1].strip().strip('"')
    raise RuntimeError("no ledger path in the bench config")


async def bench_startup_idle(
    tmp: Path, ledger: Path | None, idle_s: float, do_startup: bool, do_idle: bool,
    repeat: int = 3,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with table(tmp, ledger=ledger) as t:
        if ledger is not None and ledger.exists():
            with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as conn:
                out["ledger_events"] = conn.execute("SELECT max(seq) FROM journal").fetchone()[0]
        t.start_daemon()
        marks: dict[str, float] = {}
        status_fut = t.sub.expect(
            lambda topic, m: topic.endswith("/status") and m.get("status") == "online"
            and m.get("ts", "") > ""
        )
        meter_fut = t.sub.expect(lambda topic, m: "/meter/" in topic)
        deadline = time.perf_counter() + 60
        while time.perf_counter() < deadline and len(marks) < 4:
            assert t.notify is not None
            t.notify.poll()
            if t.notify.ready_at is not None and "ready_notify" not in marks:
                marks["ready_notify"] = t.notify.ready_at
            if "log_running" not in marks and t.logged_running():
                marks["log_running"] = time.perf_counter()
            if status_fut.done() and "status_online" not in marks:
                marks["status_online"] = status_fut.result()
            if meter_fut.done() and "first_meter" not in marks:
                marks["first_meter"] = meter_fut.result()
            if t.proc is not None and t.proc.poll() is not None:
                raise RuntimeError(f"daemon exited:\n{t.log_text()[-2000:]}")
            await asyncio.sleep(0.002)
            if len(marks) == 3 and "ready_notify" not in marks and time.perf_counter() > (
                t.started_at + 5
            ):
                break  # this daemon does not send READY=1 (yet)
        out["ready_s"] = {k: round(v - t.started_at, 3) for k, v in sorted(marks.items())}
        await t.online()
        await asyncio.sleep(2.0)
        out["daemon_rss_mb_after_start"] = round(rss_bytes(t.pid) / MB, 1)
        if do_idle:
            cpu0, wall0 = cpu_seconds(t.pid), time.perf_counter()
            await asyncio.sleep(idle_s)
            cpu1, wall1 = cpu_seconds(t.pid), time.perf_counter()
            out["idle"] = {
                "window_s": round(wall1 - wall0, 1),
                "cpu_s": round(cpu1 - cpu0, 3),
                "cpu_percent": round(100 * (cpu1 - cpu0) / (wall1 - wall0), 3),
                "board_heartbeat_s": t.sim.heartbeat_interval_s,
            }
        assert t.stop_daemon() == 0
    if do_startup and ledger is not None:
        out["verify"] = bench_verify(ledger, repeat=repeat)
    return out


# ---------------------------------------------------------------------------- report


def verdicts(r: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    rows: list[tuple[str, str, str, bool]] = []
    lat = r.get("latency")
    fl = r.get("floor")
    if lat:
        p99 = lat["key_to_sign"]["p99_ms"]
        rows.append(("key-to-sign p99", f"{p99:.1f} ms", "<= 15 ms", p99 <= 15))
        for d, m in lat.get("lock_to_meter_by_delay_s", {}).items():
            rows.append((f"LOCK {d} s after bets: meter p99", f"{m['p99_ms']:.1f} ms",
                         "<= 15 ms", m["p99_ms"] <= 15))
        rows.append(("meter repeats", str(lat.get("meter_repeats", 0)), "0",
                     lat.get("meter_repeats", 0) == 0))
        lost = len(lat.get("presses_without_message", []))
        rows.append(("presses without a message", str(lost), "0", lost == 0))
        if fl:
            ratio = p99 / fl["floor"]["p99_ms"]
            r["latency"]["ratio_p99_to_floor_p99"] = round(ratio, 2)
            r["latency"]["ratio_p50_to_floor_p50"] = round(
                lat["key_to_sign"]["p50_ms"] / fl["floor"]["p50_ms"], 2
            )
            rows.append(("key-to-sign p99 / floor p99", f"{ratio:.2f}x", "<= 3x", ratio <= 3))
            meter_ratio = lat["lock_to_meter"]["p99_ms"] / fl["floor"]["p99_ms"]
            r["latency"]["meter_ratio_p99_to_floor_p99"] = round(meter_ratio, 2)
            r["latency"]["meter_ratio_p50_to_floor_p50"] = round(
                lat["lock_to_meter"]["p50_ms"] / fl["floor"]["p50_ms"], 2
            )
            rows.append(("LOCK-to-meter p99 / floor p99", f"{meter_ratio:.2f}x", "<= 3x",
                         meter_ratio <= 3))
    tp = r.get("throughput")
    if tp:
        rows.append(("durable contributions/s", f"{tp['ledger_per_s']:,}", ">= 10,000",
                     tp["ledger_per_s"] >= 10_000))
        rows.append(("ledger (append_many) / bare sqlite", f"{tp['append_ratio']:.2f}x", "<= 2x",
                     tp["append_ratio"] <= 2))
    mem = r.get("memory")
    if mem:
        rows.append(("RSS after rounds (loop)", f"{mem['rss_mb_after_rounds']:.1f} MB", "<= 60 MB",
                     mem["rss_mb_after_rounds"] <= 60))
        flat = mem["growth_mb_after_first_sample"]
        rows.append(("RSS growth after first sample", f"{flat:.1f} MB", "flat (<= 2 MB)",
                     flat <= 2))
    st = r.get("startup")
    if st:
        ready = st["ready_s"].get("ready_notify", st["ready_s"].get("log_running"))
        if ready is not None:
            rows.append(("start-up to READY", f"{ready:.3f} s", "<= 1 s", ready <= 1))
        if "daemon_rss_mb_after_start" in st:
            rows.append(("daemon RSS after start", f"{st['daemon_rss_mb_after_start']:.1f} MB",
                         "<= 60 MB", st["daemon_rss_mb_after_start"] <= 60))
    v = (st or {}).get("verify")
    if v:
        rows.append(("ledger verify", f"{v['seconds']:.1f} s", "<= 15 s",
                     v["seconds"] <= 15 and v["exit"] == 0))
        rows.append(("ledger verify / its floor", f"{v['ratio']:.2f}x", "<= 1.5x",
                     v["ratio"] <= 1.5 and v["exit"] == 0))
    idle = (st or {}).get("idle")
    if idle:
        rows.append(("idle CPU", f"{idle['cpu_percent']:.2f} %", "<= 1 %",
                     idle["cpu_percent"] <= 1))
    return rows


def print_table(r: dict[str, Any], rows: list[tuple[str, str, str, bool]]) -> None:
    fl, lat = r.get("floor"), r.get("latency")
    if fl:
        for name in ("sqlite_commit", "mqtt_qos1_round_trip", "floor"):
            s = fl[name]
            print(f"  {name:<28} p50 {s['p50_ms']:7.2f} ms  p99 {s['p99_ms']:7.2f} ms  "
                  f"max {s['max_ms']:7.2f} ms  (n={s['n']})")
    if lat:
        lines = {"key_to_sign": lat["key_to_sign"], "lock_to_meter": lat["lock_to_meter"]}
        for d, m in lat.get("lock_to_meter_by_delay_s", {}).items():
            lines[f"  LOCK {d} s after bets"] = m
        for part, m in lat.get("lock_split", {}).items():
            if isinstance(m, dict):
                lines[f"  LOCK {part}"] = m
        for name, s in lines.items():
            print(f"  {name:<28} p50 {s['p50_ms']:7.2f} ms  p99 {s['p99_ms']:7.2f} ms  "
                  f"max {s['max_ms']:7.2f} ms  (n={s['n']})")
    print()
    print(f"  {'measure':<32} {'result':>14}  {'target':<16} ok")
    for name, value, target, ok in rows:
        print(f"  {name:<32} {value:>14}  {target:<16} {'yes' if ok else 'NO'}")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    counts = QUICK if args.quick else Counts()
    only = set(args.only.split(",")) if args.only else set(SECTIONS)
    unknown = only - set(SECTIONS)
    if unknown:
        raise SystemExit(f"unknown sections: {sorted(unknown)} (choose from {SECTIONS})")
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "counts": counts.__dict__,
        "machine": machine(),
    }
    with tempfile.TemporaryDirectory(prefix="bench-", dir=args.workdir) as work:
        tmp = Path(work)

        def section(name: str) -> Path:
            print(f"== {name}", flush=True)
            path = tmp / name
            path.mkdir()
            return path

        if "floor" in only:
            result["floor"] = await bench_floor(section("floor"), counts.floor)
        if "latency" in only:
            result["latency"] = await bench_latency(
                section("latency"), counts.presses, args.profile
            )
        if "throughput" in only:
            result["throughput"] = bench_throughput(
                section("throughput"), counts.wagers, counts.group
            )
        big: Path | None = None
        if "memory" in only or "startup" in only:
            d = section("memory")
            big = d / "big.db"
            # A config for the memory loop naming the ledger the daemon will open later.
            cfg = d / "memloop.toml"
            with Mosquitto() as broker:  # only to fill the config's [mqtt]; not used
                from bench.table import write_config

                write_config(d, broker, d / "board", big)
            (d / "progressived.toml").rename(cfg)
            result["memory"] = bench_memory(
                d, cfg, counts.rounds if "memory" in only else 0, counts.every, counts.events
            )
            if "memory" not in only:
                result.pop("memory")
        if "startup" in only or "idle" in only:
            result["startup"] = await bench_startup_idle(
                section("startup"), big, counts.idle_s, "startup" in only, "idle" in only,
                repeat=1 if args.quick else 3,
            )
    rows = verdicts(result)
    result["targets"] = [
        {"measure": n, "result": v, "target": t, "met": ok} for n, v, t, ok in rows
    ]
    print_table(result, rows)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="tiny counts: a smoke run")
    parser.add_argument("--out", type=Path, help="write the JSON here "
                        "(default bench/results/<date>[-quick].json)")
    parser.add_argument("--only", help=f"comma-separated sections of {','.join(SECTIONS)}")
    parser.add_argument("--profile", type=Path, help="run the latency section's daemon under "
                        "cProfile and write its stats here (its figures then include the "
                        "profiler's overhead: not for the record)")
    parser.add_argument("--workdir", help="where the temporary ledgers go (default: $TMPDIR)")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args))
    out = args.out
    if out is None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H%M")
        out = ROOT / "bench" / "results" / f"{stamp}{'-quick' if args.quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
