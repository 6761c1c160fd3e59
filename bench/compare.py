"""Compare a benchmark run with the last committed one: ``python -m bench.compare OLD NEW``.

Why a module of its own: a regression must be named before it lands, not found three days
later (the link once fell from 16,043 to 6,666 wagers/s in one reshaping and nobody saw
it). ``python -m bench.run --compare bench/results/LAST.json`` runs the benchmark and then
this comparison; ``python -m bench.compare OLD.json NEW.json`` compares two saved runs.

Each figure is judged by its ratio to the floor measured in the same run wherever the run has
one (the machine's load moves the floor and the figure alike; the ratio stays), and by its
absolute value only where no floor exists. A figure more than ``TOLERANCE`` worse than the
baseline's is named; the exit code is 1 when any is, 0 when none is, 2 when a file cannot be
read. Figures present in only one of the two runs are listed as not compared.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

TOLERANCE = 0.15  # more than 15% worse is a regression (docs/performance.md)


class Better(Enum):
    """Which way a figure improves."""

    HIGHER = "higher"
    LOWER = "lower"


@dataclass(frozen=True)
class Figure:
    """One compared figure: a path into the run's JSON, optionally divided by a floor path."""

    name: str
    path: str
    better: Better
    floor: str | None = None  # the same run's floor this figure is divided by
    unit: str = ""


def _dig(run: dict[str, Any], path: str) -> float | None:
    node: Any = run
    for part in path.split("/"):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, int | float):
        return None
    return float(node)


FLOOR_P99 = "floor/floor/p99_ms"
FIGURES: tuple[Figure, ...] = (
    Figure("key -> sign p99 / floor p99", "latency/key_to_sign/p99_ms", Better.LOWER, FLOOR_P99),
    Figure("LOCK -> meter p99 / floor p99", "latency/lock_to_meter/p99_ms", Better.LOWER,
           FLOOR_P99),
    *(
        Figure(f"LOCK {d} s after bets: meter p99 / floor p99",
               f"latency/lock_to_meter_by_delay_s/{d}/p99_ms", Better.LOWER, FLOOR_P99)
        for d in ("0.02", "0.35", "1.2")
    ),
    Figure("durable contributions/s / bare sqlite inserts/s", "throughput/ledger_per_s",
           Better.HIGHER, "throughput/bare_sqlite_per_s"),
    Figure("ledger append_many / bare sqlite", "throughput/append_ratio", Better.LOWER),
    Figure("link: durable acknowledged wagers/s", "link/throughput/wagers_per_s", Better.HIGHER,
           unit="/s"),
    Figure("link: claim -> every sign p99 / floor p99", "link/claim_to_sign/p99_ms",
           Better.LOWER, FLOOR_P99),
    Figure("link ledger / bare sqlite", "link/ledger/ratio", Better.LOWER),
    Figure("link controller RSS", "link/link_rss_max_mib", Better.LOWER, unit=" MiB"),
    Figure("HA link: wagers/s", "link_ha/wagers_per_s", Better.HIGHER, unit="/s"),
    Figure("HA link: ledger write / bare psycopg", "link_ha/ledger_cost_ratio", Better.LOWER),
    Figure("ledger verify / its floor", "startup/verify/ratio", Better.LOWER),
    Figure("verify --since-verified / its floor", "startup/verify/since_verified/ratio",
           Better.LOWER),
    Figure("start-up to READY", "startup/ready_s/ready_notify", Better.LOWER, unit=" s"),
    Figure("idle CPU", "startup/idle/cpu_percent", Better.LOWER, unit=" %"),
    Figure("RSS after rounds (loop)", "memory/rss_mb_after_rounds", Better.LOWER, unit=" MB"),
    Figure("daemon RSS after start", "startup/daemon_rss_mb_after_start", Better.LOWER,
           unit=" MB"),
    Figure("web sign: message -> painted frame p99", "websign/pixels/frame/p99_ms",
           Better.LOWER, unit=" ms"),
    Figure("web sign server RSS", "websign/memory/rss_pages_mb", Better.LOWER, unit=" MB"),
)


@dataclass(frozen=True)
class Verdict:
    """One figure in both runs: its compared values (ratios where a floor exists)."""

    figure: Figure
    old: float
    new: float

    @property
    def change(self) -> float:
        """Signed fraction by which the figure got worse (negative: better)."""
        if self.old == 0:
            return 0.0 if self.new == 0 else float("inf")
        delta = (self.new - self.old) / self.old
        return delta if self.figure.better is Better.LOWER else -delta

    @property
    def worse(self) -> bool:
        return self.change > TOLERANCE


def _value(run: dict[str, Any], figure: Figure) -> float | None:
    value = _dig(run, figure.path)
    if value is None or figure.floor is None:
        return value
    floor = _dig(run, figure.floor)
    return None if not floor else value / floor


def compare(old: dict[str, Any], new: dict[str, Any],
            figures: Sequence[Figure] = FIGURES) -> tuple[list[Verdict], list[str]]:
    """The verdict of every figure found in both runs, and the names of those missing."""
    verdicts: list[Verdict] = []
    missing: list[str] = []
    for figure in figures:
        a, b = _value(old, figure), _value(new, figure)
        if a is None or b is None:
            missing.append(figure.name)
        else:
            verdicts.append(Verdict(figure, a, b))
    return verdicts, missing


def _shown(figure: Figure, value: float) -> str:
    if figure.floor is not None or not figure.unit:
        return f"{value:.2f}x"
    return f"{value:,.0f}{figure.unit}" if value >= 100 else f"{value:.2f}{figure.unit}"


def _change(v: Verdict) -> str:
    if abs(v.change) < 0.005:
        return "same"
    word = "worse" if v.change > 0 else "better"
    flag = f"  <- more than {TOLERANCE:.0%} worse" if v.worse else ""
    return f"{abs(v.change):.0%} {word}{flag}"


def report(old: dict[str, Any], new: dict[str, Any],
           emit: Callable[[str], None] = print) -> int:
    """Print the comparison; 1 when a figure is more than ``TOLERANCE`` worse, else 0."""
    if old.get("mode") != new.get("mode"):
        emit(f"warning: comparing a {old.get('mode')} run with a {new.get('mode')} run: "
             "their counts differ")
    verdicts, missing = compare(old, new)
    emit(f"  {'figure':<52} {'before':>12} {'now':>12}  change")
    for v in verdicts:
        emit(f"  {v.figure.name:<52} {_shown(v.figure, v.old):>12} {_shown(v.figure, v.new):>12}"
             f"  {_change(v)}")
    if missing:
        emit(f"  not in both runs: {', '.join(missing)}")
    worse = [v.figure.name for v in verdicts if v.worse]
    if worse:
        emit(f"{len(worse)} figure(s) more than {TOLERANCE:.0%} worse: {'; '.join(worse)}")
        return 1
    emit(f"no figure more than {TOLERANCE:.0%} worse ({len(verdicts)} compared)")
    return 0


def load(path: Path) -> dict[str, Any]:
    """A saved run; ``SystemExit(2)`` with one line when it cannot be read."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"bench.compare: cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise SystemExit(f"bench.compare: {path} is not a benchmark result")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path, help="the baseline (bench/results/LAST.json)")
    parser.add_argument("new", type=Path, help="the run to judge")
    args = parser.parse_args(argv)
    try:
        old, new = load(args.old), load(args.new)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    return report(old, new)


if __name__ == "__main__":
    sys.exit(main())
