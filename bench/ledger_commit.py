"""The ledger's commit alone: planned rows in, one durable SQLite transaction out.

Why a module of its own: the I/O half of a table ledger write
(:meth:`progressived.storage.sqlite.SqliteStore.write`: journal rows, postings, balances,
idempotency keys and the head in one ``BEGIN IMMEDIATE`` .. ``COMMIT`` at
``synchronous=FULL``) is the other part of ``bench.run --only throughput``'s
``append_ratio``, beside the plan (bench.ledger_plan). This plans ``wagers`` linked
contributions in groups of ``group`` beforehand (untimed), then commits each group through
the ledger's store and inserts the same rows bare into a copy of the schema (as
bench.throughput's floor), alternately, group by group, so both see the same load. The
ratio of the two wall-clock sums is the figure to compare (docs/performance.md,
"Throughput").

    .venv/bin/python -m bench.ledger_commit [--wagers 20000] [--group 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.ledger_plan import AT, linked_batches
from bench.throughput import _bare_copy
from progressived.ledger import Ledger
from progressived.ledger.plan import CommittedHead, Plan, plan


def measure(tmp: Path, wagers: int = 20_000, group: int = 1000) -> dict[str, Any]:
    """Wall-clock seconds of the store's writes and of the bare inserts, and their ratio."""
    params, _, batches = linked_batches(wagers)
    db = tmp / "commit.db"
    commit_s = bare_s = 0.0
    with Ledger.open(db, params, at=AT, software="bench") as ledger:
        store = ledger._store  # the adapter the ledger commits through
        head = CommittedHead(ledger.head_seq, ledger.head_hash, ledger.balances, ledger.state)
        plans: list[Plan] = []
        for start in range(0, wagers, group):
            plans.append(plan(batches[start : start + group], head, {}, table_id=params.table_id))
            head = plans[-1].head
        bare = _bare_copy(db, tmp / "bare.db")
        for rows in plans:
            started = time.perf_counter()
            store.write(rows)
            commit_s += time.perf_counter() - started
            started = time.perf_counter()
            bare.execute("BEGIN IMMEDIATE")
            bare.executemany(
                "INSERT INTO journal (seq, at, table_id, round, seat, kind, category, actor, "
                "idem_key, data, hash, prev_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows.journal,
            )
            bare.executemany(
                "INSERT INTO postings (seq, leg, account, units) VALUES (?, ?, ?, ?)",
                rows.postings,
            )
            bare.executemany(
                "INSERT INTO idempotency (key, first_seq, last_seq) VALUES (?, ?, ?)", rows.keys
            )
            bare.execute("COMMIT")
            bare_s += time.perf_counter() - started
        bare.close()
    return {
        "wagers": wagers,
        "group": group,
        "commit_s": round(commit_s, 3),
        "bare_sqlite_s": round(bare_s, 3),
        "commit_per_s": round(wagers / commit_s),
        "ratio": round(commit_s / bare_s, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ledger_commit", description=__doc__)
    parser.add_argument("--wagers", type=int, default=20_000)
    parser.add_argument("--group", type=int, default=1000)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a line")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        figures = measure(Path(tmp), args.wagers, args.group)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(
            f"commit {figures['commit_s']:.3f} s ({figures['commit_per_s']:,} rows/s), bare "
            f"SQLite {figures['bare_sqlite_s']:.3f} s: ratio {figures['ratio']:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
