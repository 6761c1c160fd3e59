"""A synthetic table that writes rounds into a ledger as fast as it can (load generation).

Not part of the installed package: it lives beside the benchmarks, its other users are
the ledger tests. Used by the crash tests (a child process runs ``python -m bench.stress``
from the repository root and
is killed with SIGKILL at random moments; it prints ``ACK <key> <first> <last>`` only
after ``append`` returned, i.e. after COMMIT was fsynced) and by benchmarks. Rounds are
random but valid: bets, LOCK, winners keyed (sometimes the 100% meter hand, confirmed or
rejected by the supervisor), RECONCILE, now and then a VOID; each command carries an
idempotency key.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

from progressived.config.paytables import find_paytable
from progressived.core.params import MeterParams, TableParams
from progressived.engine import (
    Command,
    Confirm,
    KeyHand,
    Lock,
    Reconcile,
    Reject,
    Sensors,
    Void,
    decide,
)
from progressived.engine.state import TableState
from progressived.ledger import AppendResult, Batch, Ledger


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def demo_params(table_id: str = "stress-1", paytable: str = "tcp-sd-1") -> TableParams:
    """A table with a contributing meter (15% to the meter, 5% to the reserve)."""
    return TableParams(
        table_id=table_id,
        paytable=find_paytable(paytable),
        meters=(MeterParams(rate=Fraction(15, 100), reserve_rate=Fraction(5, 100)),),
    )


def round_commands(rng: random.Random, params: TableParams) -> Iterator[Command]:
    """One random round; Confirm/Reject are only offered when they can apply."""
    seats = rng.sample(range(1, params.seats + 1), rng.randint(1, params.seats))
    yield Sensors(present=frozenset(seats))
    yield Lock()
    yield Sensors(present=frozenset())
    hands = [rule.hand.value for rule in params.paytable.hands]
    for seat in rng.sample(seats, rng.randint(0, min(2, len(seats)))):
        yield KeyHand(seat=seat, hand=rng.choice(hands))
    yield Confirm(actor="supervisor") if rng.random() < 0.8 else Reject(actor="supervisor")
    yield Confirm(actor="supervisor")
    if rng.random() < 0.05:
        yield Void(actor="supervisor")
    yield Reconcile()


def drive(
    ledger: Ledger,
    params: TableParams,
    *,
    rounds: int,
    seed: int,
    run: str,
    group: int = 1,
    on_commit: Callable[[Sequence[tuple[str, AppendResult]]], None] | None = None,
    clock: Callable[[], str] = utc_now,
) -> int:
    """Play ``rounds`` rounds (0: forever); returns the number of commands journaled.

    With ``group > 1`` up to that many accepted commands share one transaction
    (:meth:`Ledger.append_many`). ``on_commit`` hears each committed (key, result).
    ``clock`` stamps each command (default: now; a report's tests and benchmark play a
    quarter in seconds with a clock of their own).
    """
    rng = random.Random(seed)
    state: TableState = ledger.state
    batches: list[Batch] = []
    keys: list[str] = []
    count = 0

    def flush() -> None:
        if batches:
            results = ledger.append_many(batches)
            if on_commit is not None:
                on_commit(list(zip(keys, results, strict=True)))
            batches.clear()
            keys.clear()

    played = 0
    while rounds == 0 or played < rounds:
        played += 1
        for template in round_commands(rng, params):
            at = clock()
            command = _stamp(template, at)
            decision = decide(params, state, command)
            key = f"{run}:{count}"
            count += 1
            if not decision.accepted:
                if decision.code in {"nothing-pending", "not-locked", "award-pending"}:
                    continue  # offered blindly by round_commands; not worth a row
                flush()
                result = ledger.record(
                    "command_rejected",
                    {
                        "command": type(command).__name__,
                        "code": decision.code,
                        "reason": decision.reason,
                    },
                    at=at,
                    actor=command.actor,
                    round=state.round,
                    idempotency_key=key,
                )
                if on_commit is not None:
                    on_commit([(key, result)])
                continue
            state = decision.state
            if not decision.events:
                continue
            batches.append(Batch(decision.events, state, at, command.actor, key))
            keys.append(key)
            if len(batches) >= group:
                flush()
    flush()
    return count


def _stamp(command: Command, at: str) -> Command:
    return replace(command, at=at)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--table", default="stress-1")
    parser.add_argument("--rounds", type=int, default=0, help="0 = until killed")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--run", default="run")
    parser.add_argument("--group", type=int, default=1)
    args = parser.parse_args(argv)
    params = demo_params(args.table)
    ledger = Ledger.open(args.db, params, at=utc_now(), software="stress")
    print(f"OPEN {ledger.head_seq}", flush=True)

    def ack(done: Sequence[tuple[str, AppendResult]]) -> None:
        sys.stdout.write("".join(f"ACK {k} {r.first_seq} {r.last_seq}\n" for k, r in done))
        sys.stdout.flush()

    try:
        drive(
            ledger,
            params,
            rounds=args.rounds,
            seed=args.seed,
            run=args.run,
            group=args.group,
            on_commit=ack,
        )
    finally:
        ledger.close()
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
