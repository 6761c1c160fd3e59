"""The I/O half of a ledger write lives in the storage port's SQLite adapter
(:mod:`progressived.storage.sqlite`: one ``BEGIN IMMEDIATE`` transaction that inserts a
plan); the names the daemon and the ledger's modules import from here stay here.

Micro-benchmark: ``python -m bench.ledger_commit`` (the store's write against bare inserts
of the same rows; docs/performance.md, "Micro-benchmarks").
"""

from collections.abc import Sequence

from progressived.storage.port import Statement, Writable
from progressived.storage.sqlite import (
    BUSY_TIMEOUT_MS,
    JOURNAL_SIZE_LIMIT,
    SqliteStore,
    lock,
    transaction,
    translate,
)


def commit(store: SqliteStore, plan: Writable, extra: Sequence[Statement] = ()) -> None:
    """Insert ``plan`` and move the recorded head in one durable transaction: the table
    ledger's one write (a seam its tests count commits at)."""
    store.write(plan, extra=extra)

__all__ = [
    "BUSY_TIMEOUT_MS",
    "JOURNAL_SIZE_LIMIT",
    "Statement",
    "commit",
    "lock",
    "transaction",
    "translate",
]
