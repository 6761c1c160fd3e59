"""bench/compare.py: a run more than 15% worse than the baseline is named, judged by its ratio
to the same run's floor wherever there is one (a regression must not land silently).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from bench.compare import main, report


def _run() -> dict[str, Any]:
    """The figures of a saved run that the comparison reads (shaped as bench.run writes)."""
    return {
        "mode": "full",
        "floor": {"floor": {"p99_ms": 1.0}},
        "latency": {"key_to_sign": {"p99_ms": 4.0}, "lock_to_meter": {"p99_ms": 3.0}},
        "throughput": {"ledger_per_s": 20_000, "bare_sqlite_per_s": 40_000,
                       "append_ratio": 1.2},
        "link": {"throughput": {"wagers_per_s": 20_000}},
    }


def _judge(old: dict[str, Any], new: dict[str, Any]) -> tuple[int, list[str]]:
    lines: list[str] = []
    return report(old, new, lines.append), lines


def test_the_same_run_is_not_a_regression() -> None:
    code, lines = _judge(_run(), _run())
    assert code == 0
    assert lines[-1] == "no figure more than 15% worse (5 compared)"


def test_a_figure_more_than_15_percent_worse_is_named_and_fails() -> None:
    new = _run()
    new["link"]["throughput"]["wagers_per_s"] = 16_000  # 20% fewer
    new["latency"]["key_to_sign"]["p99_ms"] = 4.4  # 10%: within the tolerance
    code, lines = _judge(_run(), new)
    assert code == 1
    assert lines[-1] == "1 figure(s) more than 15% worse: link: durable acknowledged wagers/s"


def test_a_moved_floor_is_judged_by_the_ratio_not_the_absolute_figure() -> None:
    new = _run()
    new["floor"]["floor"]["p99_ms"] = 2.0  # a busier machine: the floor doubled
    new["latency"]["key_to_sign"]["p99_ms"] = 8.0  # and key -> sign with it: same ratio
    new["throughput"]["bare_sqlite_per_s"] = 20_000
    new["throughput"]["ledger_per_s"] = 10_000
    assert _judge(_run(), new)[0] == 0
    new["latency"]["key_to_sign"]["p99_ms"] = 10.0  # 5x the floor instead of 4x: worse
    code, lines = _judge(_run(), new)
    assert code == 1 and "key -> sign p99 / floor p99" in lines[-1]


def test_a_figure_missing_from_one_run_is_listed_not_judged() -> None:
    new = copy.deepcopy(_run())
    del new["link"]
    code, lines = _judge(_run(), new)
    assert code == 0
    assert any(line.startswith("  not in both runs: ") and "link: durable" in line
               for line in lines)


def test_an_unreadable_baseline_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "new.json"
    good.write_text(json.dumps(_run()))
    assert main([str(tmp_path / "missing.json"), str(good)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench.compare: cannot read ")
    assert main([str(good), str(good)]) == 0
