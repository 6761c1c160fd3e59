"""The ledger's exceptions: :mod:`progressived.storage.errors`, where the storage adapters
raise them (the names every caller imported from here stay here)."""

from progressived.storage.errors import (
    Fenced,
    LeaseHeld,
    LedgerError,
    LedgerExists,
    LedgerMismatch,
    LedgerMissing,
    LedgerUnavailable,
)

__all__ = [
    "Fenced",
    "LeaseHeld",
    "LedgerError",
    "LedgerExists",
    "LedgerMismatch",
    "LedgerMissing",
    "LedgerUnavailable",
]
