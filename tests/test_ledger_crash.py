"""Crash safety: a writer killed with SIGKILL at random moments loses nothing it
acknowledged, and leaves a ledger that passes every check.

The child (``python -m bench.stress``) prints ``ACK key first last`` only
after the transaction committed (``synchronous=FULL``). After each kill: ``PRAGMA
integrity_check``, ``ledger verify`` (hash chain, postings, balances, snapshots, the
identity), every acknowledged key present with the same rows, and the recovered state
equal to a full replay. The reliability suite runs the same loop >= 100 times.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench.stress import demo_params
from progressived.engine.core import evolve
from progressived.engine.events import event_from_dict
from progressived.engine.state import TableState
from progressived.ledger import Ledger
from progressived.ledger.verify import verify

pytestmark = pytest.mark.e2e  # a ledger writer process SIGKILLed (pyproject.toml's markers)

TABLE = "crash-1"
ROOT = Path(__file__).resolve().parent.parent


def run_child_and_kill(
    db: Path, run: str, seed: int, rng: random.Random, *, while_opening: bool = False
) -> list[str]:

    """Start a writer, SIGKILL it after a random delay, return the lines it completed.

    ``while_opening``: the delay counts from the start (the kill may land while the file is
    created or recovered); otherwise from the writer's OPEN line.
    """
    group = rng.choice([1, 1, 4, 32])
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.stress",
            "--db",
            str(db),
            "--table",
            TABLE,
            "--run",
            run,
            "--seed",
            str(seed),
            "--group",
            str(group),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    lines: list[str] = []
    opened = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.endswith("\n"):  # a line cut by the kill was never acknowledged
                lines.append(line)
                opened.set()  # the first line is OPEN: the ledger is open and writing starts

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if while_opening:  # a moment during start-up, however long start-up takes here
        time.sleep(rng.uniform(0.0, 0.5))
    else:  # while writing: timed from the open, so a slow start-up cannot eat the delay
        assert opened.wait(60), "the writer never opened its ledger"
        time.sleep(rng.uniform(0.05, 0.85))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    reader.join(timeout=30)
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert proc.returncode == -signal.SIGKILL, err
    assert "Traceback" not in err, err
    return lines


def full_replay(db: Path) -> TableState:
    state = TableState()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    for (data,) in conn.execute("SELECT data FROM journal WHERE category = 'engine' ORDER BY seq"):
        state = evolve(state, event_from_dict(json.loads(data)))
    conn.close()
    return state


def check_after_kill(db: Path, acked: dict[str, tuple[int, int]]) -> None:
    if not db.exists():
        assert not acked
        return
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    initialised = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE name = 'journal'"
    ).fetchone()[0]
    conn.close()
    if not initialised:  # killed while creating the file: the next open completes it
        assert not acked
        Ledger.open(db, demo_params(TABLE), at="2026-11-21T19:00:00Z").close()
    report = verify(db)
    assert report.ok, report.problems[:5]
    assert report.identity_gap == 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    stored = {k: (f, last) for k, f, last in conn.execute("SELECT * FROM idempotency")}
    conn.close()
    missing = {k: v for k, v in acked.items() if stored.get(k) != v}
    assert not missing, f"acknowledged but lost: {sorted(missing)[:5]}"
    with Ledger.open(db, demo_params(TABLE), at="2026-11-21T19:00:00Z") as ledger:
        assert ledger.state == full_replay(db)
        if acked:
            key, rows = next(iter(acked.items()))
            again = ledger.append((), ledger.state, at="2026-11-21T19:00:00Z", idempotency_key=key)
            assert (again.first_seq, again.last_seq, again.duplicate) == (*rows, True)


def crash_loop(directory: Path, kills: int, seed: int, per_db: int = 10) -> int:
    """Run ``kills`` kill/check cycles (a new ledger every ``per_db``); returns acks seen."""
    rng = random.Random(seed)
    total = 0
    acked: dict[str, tuple[int, int]] = {}
    db = directory / "ledger-0.db"
    for i in range(kills):
        if i % per_db == 0:
            db = directory / f"ledger-{i // per_db}.db"
            acked = {}
        # One kill in four lands during start-up; the others while writing.
        opening = i % 4 == 3
        for line in run_child_and_kill(db, f"k{i}", seed * 1000 + i, rng, while_opening=opening):
            if line.startswith("ACK "):
                _, key, first, last = line.split()
                acked[key] = (int(first), int(last))
                total += 1
        check_after_kill(db, acked)
    return total


def test_sigkill_loses_nothing_acknowledged(tmp_path: Path) -> None:
    kills = int(os.environ.get("LEDGER_CRASH_KILLS_DEFAULT", "4"))
    assert crash_loop(tmp_path, kills, seed=int(os.environ.get("LEDGER_CRASH_SEED", "7"))) > 0
