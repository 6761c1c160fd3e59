"""The ledger's plan alone: a group of the engine's batches in, the rows to insert out.

Why a module of its own: :func:`progressived.ledger.plan.plan` is the pure half of every
table ledger write (numbering, each row's JSON text, the hash chain, postings, balances,
idempotency keys); in ``bench.run --only throughput`` it is one part of ``append_ratio``
beside the commit. This measures it in one process, in CPU time (``time.process_time``),
best of ``repeat`` runs over ``wagers`` linked contributions decided by the engine
beforehand, in groups of ``group`` (as the throughput section groups them), against its
floor measured in the same run: SHA-256 of the same rows' chained text (what any hash-chained
writer pays per row). Its ratio is the figure to compare (docs/performance.md, "Throughput").

    .venv/bin/python -m bench.ledger_plan [--wagers 20000] [--group 1000] [--repeat 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from hashlib import sha256
from typing import Any

from bench.throughput import linked_params
from progressived.core.params import TableParams
from progressived.engine import LinkedWagers, decide, initial_state
from progressived.ledger import Batch
from progressived.ledger.plan import CommittedHead, plan

AT = "2026-11-28T23:00:00.000000Z"


def linked_batches(wagers: int) -> tuple[TableParams, CommittedHead, list[Batch]]:
    """``wagers`` linked contributions decided by the engine, one batch each (as
    bench.throughput), and the head of a new ledger they follow."""
    params = linked_params()
    opened = initial_state(params, AT)
    state = opened.state
    batches: list[Batch] = []
    for i in range(wagers):
        cid = f"bench-2:{i}"
        command = LinkedWagers(
            source_table="bench-2", count=1, contribution_id=cid, at=AT, actor="link"
        )
        decision = decide(params, state, command)
        if not decision.accepted:
            raise RuntimeError(decision.reason)
        state = decision.state
        batches.append(Batch(decision.events, state, AT, "link", cid))
    head = CommittedHead(seq=1, balances=dict(opened.state.balances), state=opened.state)
    return params, head, batches


def _best(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best


def measure(wagers: int = 20_000, group: int = 1000, repeat: int = 7) -> dict[str, Any]:
    """CPU microseconds per row of ``plan`` and of its floor, and their ratio."""
    params, start, batches = linked_batches(wagers)
    groups = [batches[i : i + group] for i in range(0, len(batches), group)]
    texts: list[str] = []

    def planned() -> None:
        head = start
        for items in groups:
            head = plan(items, head, {}, table_id=params.table_id).head

    def collect() -> None:  # the floor's input, untimed: the rows' chained text
        head = start
        for items in groups:
            rows = plan(items, head, {}, table_id=params.table_id)
            head = rows.head
            texts.extend("|".join(map(str, row[:10])) for row in rows.journal)

    def floor() -> None:
        prev = start.hash
        for text in texts:
            prev = sha256(f"{prev}|{text}".encode()).hexdigest()

    collect()
    plan_s, floor_s = _best(planned, repeat), _best(floor, repeat)
    return {
        "wagers": wagers,
        "group": group,
        "plan_us_per_row": round(plan_s / wagers * 1e6, 2),
        "floor_us_per_row": round(floor_s / wagers * 1e6, 2),
        "rows_per_cpu_s": round(wagers / plan_s),
        "ratio": round(plan_s / floor_s, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ledger_plan", description=__doc__)
    parser.add_argument("--wagers", type=int, default=20_000)
    parser.add_argument("--group", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7, help="runs (the best is reported)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a line")
    args = parser.parse_args(argv)
    figures = measure(args.wagers, args.group, args.repeat)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(
            f"plan {figures['plan_us_per_row']:.2f} CPU us/row "
            f"({figures['rows_per_cpu_s']:,} rows/CPU s); floor (SHA-256 of the chained text) "
            f"{figures['floor_us_per_row']:.2f} us/row; ratio {figures['ratio']:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
