"""The engine's ``decide`` alone: one command in, its events and the next state out.

Why a module of its own: the link's stream of linked contributions and a table's rounds
both pass every command through ``decide`` before the ledger sees it, and in
``bench.run --only throughput`` the engine's part drowns in the commit's noise on a shared
machine. This measures, in one process, the CPU time (``time.process_time``: other
processes' load moves it far less than the wall clock) per decision, best of ``repeat``
runs of ``number``: a linked contribution (the throughput loop's engine half) and the
commands of random valid table rounds (bench.stress), per command
(docs/performance.md, "Throughput").

    .venv/bin/python -m bench.engine_decide [--number 20000] [--repeat 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import time
import timeit
from collections.abc import Sequence
from dataclasses import replace

from bench.stress import demo_params, round_commands
from bench.throughput import linked_params
from progressived.engine import LinkedWagers, decide, initial_state
from progressived.engine.commands import Command
from progressived.engine.state import TableState

AT = "2026-11-28T23:00:00.000000Z"


def _round_commands(rounds: int) -> tuple[TableState, list[Command]]:
    """The commands of ``rounds`` random valid rounds and the state they start from."""
    params, rng = demo_params(), random.Random(7)
    commands = [replace(c, at=AT) for _ in range(rounds) for c in round_commands(rng, params)]
    return initial_state(params, AT).state, commands


def measure(number: int = 20_000, repeat: int = 7) -> dict[str, dict[str, float]]:
    """CPU microseconds per decision (best run) and decisions per CPU second."""
    out: dict[str, dict[str, float]] = {}
    linked = linked_params()
    start = initial_state(linked, AT).state
    wager = LinkedWagers(
        source_table="bench-2", count=1, contribution_id="bench-2:1", at=AT, actor="link"
    )
    best = min(
        timeit.repeat(
            lambda: decide(linked, start, wager),
            number=number,
            repeat=repeat,
            timer=time.process_time,
        )
    )
    out["linked contribution"] = {
        "us": round(best / number * 1e6, 2),
        "per_s": round(number / best),
    }
    params = demo_params()
    state, commands = _round_commands(max(1, number // 20))

    def rounds() -> None:
        current = state
        for command in commands:
            decision = decide(params, current, command)
            if decision.accepted:
                current = decision.state

    best = min(timeit.repeat(rounds, number=1, repeat=repeat, timer=time.process_time))
    out["table round command"] = {
        "us": round(best / len(commands) * 1e6, 2),
        "per_s": round(len(commands) / best),
    }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine_decide", description=__doc__)
    parser.add_argument("--number", type=int, default=20_000, help="decisions per run")
    parser.add_argument("--repeat", type=int, default=7, help="runs (the best is reported)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    figures = measure(args.number, args.repeat)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"{'command':<24} {'CPU us':>8} {'decisions/CPU s':>16}")
    for name, row in figures.items():
        print(f"{name:<24} {row['us']:>8.2f} {row['per_s']:>16,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
