"""The benchmark harness still runs (``bench.run --quick``: tiny counts, figures not judged)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.latency_budget import STAGES
from bench.run import SECTIONS

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A short temporary directory instead of pytest's: the bench makes Unix sockets (a
    NOTIFY_SOCKET, the control socket) inside it, and their paths hold 107 bytes at most,
    which pytest-xdist's per-worker directories exceed."""
    short = Path(tempfile.mkdtemp(prefix="pb-", dir="/tmp"))
    yield short
    shutil.rmtree(short, ignore_errors=True)


# The table's sections, whose figures the assertions below read (the floor's p99 is a
# target's divisor); the rest (the link, the web sign, and any new one) run beside them in a
# second process, so that the two halves of the smoke take two workers at once instead of
# one for their sum. The HA link's (a Patroni cluster: minutes) is the reliability suite's.
TABLE_SECTIONS = ("floor", "latency", "throughput", "memory", "startup", "idle")
OTHER_SECTIONS = tuple(s for s in SECTIONS if s not in TABLE_SECTIONS and s != "link-ha")


def quick(tmp_path: Path, sections: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """``bench.run --quick --only SECTIONS``: its JSON and its standard output."""
    out = tmp_path / "quick.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.run",
            "--quick",
            "--only",
            ",".join(sections),
            "--out",
            str(out),
            "--workdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=110,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.read_text())
    assert result["mode"] == "quick"
    assert set(sections) <= set(SECTIONS)
    return result, proc.stdout


@pytest.mark.timeout(120)
def test_bench_quick_runs_the_other_sections(tmp_path: Path) -> None:
    result, _ = quick(tmp_path, OTHER_SECTIONS)
    assert {"link", "websign"} <= set(result)


@pytest.mark.timeout(120)
def test_bench_quick_runs_and_writes_json(tmp_path: Path) -> None:
    result, stdout = quick(tmp_path, TABLE_SECTIONS)
    assert result["latency"]["key_to_sign"]["n"] >= 24
    assert result["latency"]["received_all_in_journal"]
    # LOCK -> the meter message, by how long after the last bet change LOCK was pressed
    assert set(result["latency"]["lock_to_meter_by_delay_s"]) == {"0.02", "0.35", "1.2"}
    assert result["latency"]["lock_to_meter"]["n"] == result["latency"]["by_key"]["LOCK"]["n"]
    assert result["latency"]["meter_repeats"] == 0
    # key -> sign stage by stage, from the daemon's own spans (bench/latency_budget.py)
    budget = result["latency"]["key_to_sign_budget"]
    assert set(budget) == set(STAGES)
    assert budget["commit"]["n"] == result["latency"]["key_to_sign"]["n"]
    assert result["throughput"]["journal_rows"] == 5000
    assert result["startup"]["verify"]["exit"] == 0
    since = result["startup"]["verify"]["since_verified"]  # the quick mode really ran
    assert since["exit"] == 0 and since["mode_ok"] and since["rows_appended"] > 0
    assert result["startup"]["ready_s"]["log_running"] > 0
    assert {row["measure"] for row in result["targets"]} >= {
        "key-to-sign p99",
        "idle CPU",
        "LOCK 0.02 s after bets: meter p99",
        "LOCK-to-meter p99 / floor p99",
    }
    assert "key-to-sign p99" in stdout
