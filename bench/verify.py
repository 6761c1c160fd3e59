"""``ledger verify`` on the big ledger against its floor, measured in the same run.

The floor is one pass that reads every journal row and computes its SHA-256: SQLite builds
each row's hashed text (``chain.ROWS_SQL``, the text the hash chain covers), Python hashes
it, one thread, nothing compared or kept. Nothing that checks every row's hash can be
cheaper on this machine. Both the floor and the verify run as fresh processes (each pays
its interpreter start), alternately, ``repeat`` times each, so that each verify has a floor
measured just before it under the same load; the ratio reported is the median of those
pairs' ratios. ``python -m bench.verify --floor DB`` is the floor process.
"""

from __future__ import annotations

import argparse
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


def bench_verify(ledger: Path, repeat: int = 3) -> dict[str, Any]:
    floor: list[float] = []
    verify: list[float] = []
    exits: list[int] = []
    output: list[str] = []
    for _ in range(repeat):
        seconds, proc = _timed([sys.executable, "-m", "bench.verify", "--floor", str(ledger)])
        if proc.returncode != 0:
            raise RuntimeError(f"verify floor failed:\n{proc.stderr[-2000:]}")
        floor.append(seconds)
        seconds, proc = _timed(
            [sys.executable, "-m", "progressived.cli.ctl", "ledger", "verify", "--db", str(ledger)]
        )
        verify.append(seconds)
        exits.append(proc.returncode)
        output = proc.stdout.strip().splitlines()[-3:]
    return {
        "floor_s": [round(s, 2) for s in floor],
        "verify_s": [round(s, 2) for s in verify],
        "floor_median_s": round(statistics.median(floor), 2),
        "seconds": round(statistics.median(verify), 2),
        "pair_ratios": [round(v / f, 2) for v, f in zip(verify, floor, strict=True)],
        "ratio": round(statistics.median(v / f for v, f in zip(verify, floor, strict=True)), 2),
        "exit": max(exits),
        "output": output,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--floor", type=Path, required=True, metavar="DB")
    args = parser.parse_args(argv)
    print(floor_pass(args.floor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
