"""What every benchmark section reports with: percentiles, millisecond summaries, the machine.

Why a module of its own: the sections (bench/floor.py, bench/latency.py, ...) must summarise
their samples the same way for their ratios to the floor to mean anything.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sqlite3
import statistics
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024


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
