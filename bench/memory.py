"""The ``memory`` section: RSS of the engine+ledger loop (bench/memloop.py, a child process).

Why a module of its own: the loop also builds the >= 1,000,000-event ledger the ``startup``
section opens, so it runs whenever either section is asked for.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.measure import MB, ROOT


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
