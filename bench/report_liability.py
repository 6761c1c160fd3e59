"""``progressivectl report liability`` on a quarter of a busy table: time and memory.

The ledger: bench/stress.py's random valid rounds, played through the real engine into a
real ledger (group commit) on a clock that spreads them over 2026-Q4 (UTC), until it holds
``--rows`` rows (default 2,000,000: a round every ~45 s, day and night, for 92 days). It is
built once and kept (``--ledger PATH``, default in the temporary directory; building it
takes half an hour on the 2-core machine) and reused by later runs.

Measured, each as a fresh ``progressivectl`` process (its interpreter start included), the
wall time and the peak resident memory (``getrusage`` of the children, per run):

* ``quarter``: ``report liability --quarter 2026-Q4 --json FILE`` (every row of the ledger);
* ``day``: ``--day`` of one gaming day in the middle of the quarter;
* ``shift``: ``--shift DATE/day`` of that day, one of three eight-hour shifts (its rows:
  about one 276th of the ledger's);
* ``quarter_html``: the quarter with ``--html`` and ``--pdf`` too (the figures drawn).

Targets (docs/performance.md, "Reports"): the quarter under 30 s, a shift under 1 s of its
own work (the process's start is reported beside), and memory bounded: the quarter's peak
within a few megabytes of the day's, not growing with the rows. Not a timed test: a
benchmark, run on a quiet machine. ``python -m bench.report_liability [--rows N]
[--ledger PATH] [--repeat 3] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
Q4_START = datetime(2026, 10, 1, tzinfo=UTC)
Q4_SECONDS = 92 * 24 * 3600
COMMANDS_PER_ROUND = 7.2  # bench.stress's rounds, measured: commands stamped per round
ROWS_PER_ROUND = 11.0  # and rows journaled per round
TARGETS = {"quarter": 30.0, "shift_work": 1.0}


def build(path: Path, rows: int) -> int:
    """Play random rounds into a new ledger at ``path`` over 2026-Q4 until it has ``rows``."""
    from bench.stress import demo_params, drive
    from progressived.ledger import Ledger

    rounds = max(1, int(rows / ROWS_PER_ROUND))
    step = timedelta(seconds=Q4_SECONDS / (rounds * COMMANDS_PER_ROUND))
    now = [Q4_START + timedelta(hours=7)]

    def clock() -> str:
        now[0] += step
        return now[0].isoformat(timespec="microseconds").replace("+00:00", "Z")

    params = demo_params("busy-1")
    with Ledger.open(path, params, at=clock(), software="bench") as ledger:
        batch = 0
        while ledger.head_seq < rows:
            batch += 1
            drive(ledger, params, rounds=500, seed=batch, run=f"q{batch}", group=64,
                  clock=clock)
        return ledger.head_seq


def _run(args: list[str]) -> dict[str, Any]:
    """One ``progressivectl`` process: wall seconds, its own peak RSS (MiB, from ``wait4``),
    its exit status and the seconds of its own work (its interpreter's start left out)."""
    with tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", _TIMED, *args], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=err, text=True)
        anon = _AnonPeak(proc.pid)
        anon.start()
        _, status, usage = os.wait4(proc.pid, 0)
        anon.stop.set()
        anon.join()
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read()
    work = next((float(line.split()[1]) for line in stderr.splitlines()
                 if line.startswith("WORK ")), float("nan"))
    return {
        "seconds": round(wall, 2), "work_seconds": round(work, 3),
        # CPU of the process and of the children it waited for (the forked chain walk)
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        # resident pages, the ledger's memory-mapped ones included (SQLite maps the file for
        # the verify's scans, as ledger verify does: page cache, not the process's own)
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # kB on Linux
        # the process's own memory: anonymous pages, the process and its children summed
        "peak_anon_mib": round(anon.peak / 2**20, 1),
        "exit": proc.returncode, "stderr": stderr.strip().splitlines()[-3:],
    }


class _AnonPeak(threading.Thread):
    """Samples the anonymous resident memory (``RssAnon``) of a process and its children
    every 20 ms; ``peak`` is the largest sum seen."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.02):
            try:
                root = psutil.Process(self.pid)
                pids = [self.pid, *(c.pid for c in root.children(recursive=True))]
            except psutil.Error:
                continue
            self.peak = max(self.peak, sum(_rss_anon(pid) for pid in pids))


def _rss_anon(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# The command inside the measured process, timing its own work (imports and report), so the
# interpreter's start can be told apart from the report's.
_TIMED = """
import sys, time
started = time.perf_counter()
from progressived.cli.ctl import main
status = main(sys.argv[1:])
print(f"WORK {time.perf_counter() - started:.3f}", file=sys.stderr)
sys.exit(status)
"""


def measure(ledger: Path, repeat: int) -> dict[str, Any]:
    day = (Q4_START + timedelta(days=45)).date().isoformat()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as folder:
        out = Path(folder)
        site = out / "site.toml"  # three eight-hour shifts, the gaming day from 06:00 UTC
        site.write_text('[site]\ntime_zone = "UTC"\nshifts = [{name = "day", start = "06:00"}, '
                        '{name = "swing", start = "14:00"},\n'
                        '  {name = "graveyard", start = "22:00"}]\n')
        cases = {
            "shift": ["--shift", f"{day}/day"],
            "day": ["--day", day],
            "quarter": ["--quarter", "2026-Q4"],
            "quarter_html": ["--quarter", "2026-Q4", "--html", str(out / "q.html"),
                             "--pdf", str(out / "q.pdf")],
        }
        results: dict[str, Any] = {}
        for name, period in cases.items():
            runs = [
                _run(["report", "liability", "--db", str(ledger), "--config", str(site), *period,
                      "--json", str(out / f"{name}.json")])
                for _ in range(repeat)
            ]
            document = json.loads((out / f"{name}.json").read_text())
            results[name] = {
                "seconds": statistics.median(r["seconds"] for r in runs),
                "work_seconds": statistics.median(r["work_seconds"] for r in runs),
                "cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs),
                "runs_s": [r["seconds"] for r in runs],
                "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
                "peak_anon_mib": max(r["peak_anon_mib"] for r in runs),
                "exit": max(r["exit"] for r in runs),
                "rows": document["tables"]["sources"][0]["rows"],
                "ok": document["ok"],
            }
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--ledger", type=Path,
                        default=Path(tempfile.gettempdir()) / "progressived-busy-q4.db")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    built_s = None
    if not args.ledger.exists():
        started = time.perf_counter()
        build(args.ledger, args.rows)
        built_s = round(time.perf_counter() - started, 1)
    results = measure(args.ledger, args.repeat)
    report = {
        "ledger": str(args.ledger), "ledger_mib": round(args.ledger.stat().st_size / 2**20, 1),
        "built_s": built_s, "cpus": os.cpu_count(), "results": results,
        "verdicts": {
            "quarter_under_30s": results["quarter"]["seconds"] < TARGETS["quarter"],
            "shift_work_under_1s": results["shift"]["work_seconds"] < TARGETS["shift_work"],
        },
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
