"""The engine+ledger loop on its own, as a child process whose RSS is read after start and
every ``--every`` rounds (one JSON line each), then topped up with short rounds until the
ledger holds ``--events`` journal rows (the ledger the start-up benchmark opens).

Rounds are the crash driver's (bench.stress.round_commands: bets, LOCK,
winners keyed, confirm/reject, sometimes VOID, RECONCILE), journaled with group commit.
``python -m bench.memloop --config FILE --rounds N --every M --events E``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.stress import drive, utc_now
from progressived.config.daemon import load_daemon_config
from progressived.core.params import TableParams
from progressived.engine import Command, Lock, Reconcile, Sensors, decide
from progressived.ledger import Batch, Ledger

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * PAGE


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def top_up(ledger: Ledger, params: TableParams, target: int) -> None:
    """Short valid rounds (bets, LOCK, collect, RECONCILE) in groups until ``target`` rows."""
    state = ledger.state
    batches: list[Batch] = []
    round_no = 0
    at = utc_now()
    while ledger.head_seq < target:
        round_no += 1
        seats = frozenset(range(1, 2 + round_no % params.seats))
        commands: tuple[Command, ...] = (
            Sensors(present=seats, at=at), Lock(at=at), Sensors(present=frozenset(), at=at),
            Reconcile(at=at),
        )
        for index, command in enumerate(commands):
            decision = decide(params, state, command)
            if not decision.accepted:
                raise RuntimeError(decision.reason)
            state = decision.state
            batches.append(Batch(decision.events, state, at, "dealer", f"top-{round_no}-{index}"))
        if len(batches) >= 400:
            ledger.append_many(batches)
            batches = []
    if batches:
        ledger.append_many(batches)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=10_000)
    parser.add_argument("--group", type=int, default=64)
    parser.add_argument("--events", type=int, default=0)
    args = parser.parse_args(argv)
    config = load_daemon_config(args.config)
    params = config.params
    config.ledger.path.parent.mkdir(parents=True, exist_ok=True)
    ledger = Ledger.open(config.ledger.path, params, at=utc_now(), software="bench")
    emit(rounds=0, rss=rss(), head=ledger.head_seq, seconds=0.0)
    started = time.perf_counter()
    done = 0
    while done < args.rounds:
        step = min(args.every, args.rounds - done)
        drive(ledger, params, rounds=step, seed=done + 1, run=f"m{done}", group=args.group)
        done += step
        emit(rounds=done, rss=rss(), head=ledger.head_seq,
             seconds=round(time.perf_counter() - started, 3))
    if args.events:
        top_up(ledger, params, args.events)
        emit(rounds=done, rss=rss(), head=ledger.head_seq, topped_up=True,
             seconds=round(time.perf_counter() - started, 3))
    ledger.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
