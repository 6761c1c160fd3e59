"""The I/O half of a ledger write lives in the storage port's SQLite adapter
(:mod:`progressived.storage.sqlite`: one ``BEGIN IMMEDIATE`` transaction that inserts a
plan); the names the daemon and the ledger's modules import from here stay here."""

from progressived.storage.port import Statement
from progressived.storage.sqlite import (
    BUSY_TIMEOUT_MS,
    JOURNAL_SIZE_LIMIT,
    lock,
    transaction,
    translate,
)

__all__ = [
    "BUSY_TIMEOUT_MS",
    "JOURNAL_SIZE_LIMIT",
    "Statement",
    "lock",
    "transaction",
    "translate",
]
