"""The ``latency`` section: key-to-sign and LOCK-to-meter through the real daemon.

Why a module of its own: it drives a whole table (broker, pty board simulator, daemon,
independent subscriber; bench/table.py) round by round, and splits LOCK's path at the
daemon's journal log line (docs/performance.md, "Latency").
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.latency_budget import budget
from bench.measure import MB, summary_ms
from bench.table import Table, rss_bytes, table

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
        press_walls: list[float] = []  # every measured press (wall clock), for the budget
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
                press_walls.append(time.time())
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
        stages = budget(t.log_text(), press_walls) if not timeouts else {}
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
        "key_to_sign_budget": stages,
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
