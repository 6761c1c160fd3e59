"""``ledger verify`` on the big ledger against its floor, measured in the same run.

The floor is one pass that reads every journal row and computes its SHA-256: SQLite builds
each row's hashed text (``chain.ROWS_SQL``, the text the hash chain covers), Python hashes
it, one thread, nothing compared or kept. Nothing that checks every row's hash can be
cheaper on this machine. Both the floor and the verify run as fresh processes (each pays
its interpreter start), alternately, ``repeat`` times each, so that each verify has a floor
measured just before it under the same load; the ratio reported is the median of those
pairs' ratios. ``python -m bench.verify --floor DB`` is the floor process.

Then, given the ledger's bench config, the quick mode: the last full check recorded the
verified head (``DB.verified``); 1% more rows of random valid play are appended (group
commit, as bench.memloop), and ``ledger verify --since-verified --no-record``
(so each repeat checks the same new rows) alternates with the floor on the grown ledger,
``repeat`` pairs again. ``python -m bench.verify --ledger DB --config CFG`` runs both on
its own and prints the JSON.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def floor_pass(db: Path) -> int:
    """Read every journal row's hashed text and hash it; returns the number of rows."""
    import sqlite3
    from hashlib import sha256

    from progressived.ledger.chain import ROWS_SQL

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    conn.execute("PRAGMA mmap_size = 2147483648")  # as verify's own connections
    text_only = ROWS_SQL.replace("SELECT seq, prev_hash, hash,", "SELECT")
    rows = 0
    for (text,) in conn.execute(text_only, (0, 1 << 62)):
        sha256(text.encode()).hexdigest()
        rows += 1
    conn.close()
    return rows


def _timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False, timeout=900)
    return time.perf_counter() - started, proc


def _pairs(ledger: Path, repeat: int, *flags: str) -> dict[str, Any]:
    """``repeat`` pairs of (floor, ``ledger verify --db ledger *flags``), timed."""
    floor: list[float] = []
    verify: list[float] = []
    exits: list[int] = []
    output: list[str] = []
    errors: list[str] = []
    for _ in range(repeat):
        seconds, proc = _timed([sys.executable, "-m", "bench.verify", "--floor", str(ledger)])
        if proc.returncode != 0:
            raise RuntimeError(f"verify floor failed:\n{proc.stderr[-2000:]}")
        floor.append(seconds)
        seconds, proc = _timed(
            [
                sys.executable,
                "-m",
                "progressived.cli.ctl",
                "ledger",
                "verify",
                "--db",
                str(ledger),
                *flags,
            ]
        )
        verify.append(seconds)
        exits.append(proc.returncode)
        output = proc.stdout.strip().splitlines()[-3:]
        errors = proc.stderr.strip().splitlines()[-3:]
    return {
        "floor_s": [round(s, 2) for s in floor],
        "verify_s": [round(s, 2) for s in verify],
        "floor_median_s": round(statistics.median(floor), 2),
        "seconds": round(statistics.median(verify), 2),
        "pair_ratios": [round(v / f, 2) for v, f in zip(verify, floor, strict=True)],
        "ratio": round(statistics.median(v / f for v, f in zip(verify, floor, strict=True)), 2),
        "exit": max(exits),
        "output": output,
        "stderr": errors,
    }


def _head(ledger: Path) -> int:
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])


def grow_ledger(ledger: Path, config: Path, rows: int) -> None:
    """Append at least ``rows`` rows of random valid play (bench.stress.drive, group commit),
    with idempotency keys of their own (so a ledger can be grown more than once)."""
    from bench.stress import drive, utc_now
    from progressived.config.daemon import load_daemon_config
    from progressived.ledger import Ledger

    params = load_daemon_config(config).params
    with Ledger.open(ledger, params, at=utc_now(), software="bench") as book:
        target, run = book.head_seq + rows, f"grow-{book.head_seq}"
        step = 0
        while book.head_seq < target:
            step += 1
            drive(book, params, rounds=20, seed=step, run=f"{run}-{step}", group=64)


def bench_verify(
    ledger: Path, repeat: int = 3, config: Path | None = None, grow: float = 0.01
) -> dict[str, Any]:
    """The full check against its floor; with the ledger's ``config``, then the quick mode
    (``--since-verified``) after appending ``grow`` (a fraction) more rows."""
    out = _pairs(ledger, repeat)  # the full check (the default); the last one records the head
    if config is None:
        return out
    before = _head(ledger)
    grow_ledger(ledger, config, max(1, int(before * grow)))
    after = _head(ledger)
    since = _pairs(ledger, repeat, "--since-verified", "--no-record")
    since["rows_before"], since["rows_appended"] = before, after - before
    # The quick mode must really have run (a missing sidecar falls back to the full check).
    since["mode_ok"] = any("since-verified: rows after" in line for line in since["output"])
    out["since_verified"] = since
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--floor", type=Path, metavar="DB", help="run the floor pass once")
    what.add_argument("--ledger", type=Path, metavar="DB", help="run the whole benchmark")
    parser.add_argument("--config", type=Path, metavar="CFG", help="DB's config (quick mode)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.floor is not None:
        print(floor_pass(args.floor))
    else:
        result = bench_verify(args.ledger, repeat=args.repeat, config=args.config)
        print(json.dumps({"ledger_events": _head(args.ledger), "verify": result}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
