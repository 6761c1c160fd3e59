"""A real table ledger's rows for the archive's tests, and a row rewritten consistently."""

from __future__ import annotations

import dataclasses
from hashlib import sha256
from pathlib import Path

from bench.stress import demo_params, drive
from progressived.archive.core.wire import Row
from progressived.ledger import Ledger
from progressived.ledger.readonly import connect_readonly

AT = "2026-11-28T20:00:00.000000Z"
TABLE = "arch-1"


def table_ledger(path: Path, table: str = TABLE, rounds: int = 12, seed: int = 1) -> Path:
    """A table's ledger with ``rounds`` rounds played (idempotency keys included)."""
    params = demo_params(table)
    with Ledger.open(path, params, at=AT) as ledger:
        drive(ledger, params, rounds=rounds, seed=seed, run="archive")
    return path


# A journal row with the last row of its idempotency key's call (docs/archive.md, "rows").
ROWS = """
SELECT j.seq, j.at, j.round, j.seat, j.kind, j.category, j.actor, j.idem_key,
       CASE WHEN j.idem_key IS NULL THEN NULL ELSE i.last_seq END,
       j.data, j.prev_hash, j.hash
FROM journal j LEFT JOIN idempotency i ON i.key = j.idem_key AND i.first_seq = j.seq
WHERE j.seq > ? ORDER BY j.seq"""


def rows_of(path: Path, after: int = 0) -> list[Row]:
    """Every row of the ledger after ``after``, as a table sends them to the archive."""
    conn = connect_readonly(path)
    try:
        return [Row(*values) for values in conn.execute(ROWS, (after,))]
    finally:
        conn.close()


def rewritten(rows: list[Row], index: int, table: str = TABLE) -> list[Row]:
    """``rows`` with row ``index``'s actor changed and every later hash recomputed: a
    consistent rewrite of the tail (its own chain checks out)."""
    out = list(rows[:index])
    prev = out[-1].hash if out else "0" * 64
    for position, row in enumerate(rows[index:]):
        changed = dataclasses.replace(
            row, prev_hash=prev, actor="forger" if position == 0 else row.actor
        )
        changed = dataclasses.replace(
            changed, hash=sha256(changed.content(table).encode()).hexdigest()
        )
        out.append(changed)
        prev = changed.hash
    return out
