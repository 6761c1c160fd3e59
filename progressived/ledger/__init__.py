"""The ledger: append-only, double-entry, tamper-evident, crash-safe (SQLite WAL).

The single source of truth for a table's meters. See docs/ledger.md for the schema, the
accounts, the hash chain and how to audit a ledger with the sqlite3 tool alone.
"""

from progressived.ledger.errors import (
    Fenced,
    LeaseHeld,
    LedgerError,
    LedgerExists,
    LedgerMismatch,
    LedgerMissing,
    LedgerUnavailable,
)
from progressived.ledger.store import (
    AppendResult,
    Batch,
    JournalRow,
    Ledger,
    OutboxFn,
    OutboxMessage,
    OutboxRow,
    Recovery,
)

__all__ = [
    "AppendResult",
    "Batch",
    "Fenced",
    "JournalRow",
    "LeaseHeld",
    "Ledger",
    "LedgerError",
    "LedgerExists",
    "LedgerMismatch",
    "LedgerMissing",
    "LedgerUnavailable",
    "OutboxFn",
    "OutboxMessage",
    "OutboxRow",
    "Recovery",
]
