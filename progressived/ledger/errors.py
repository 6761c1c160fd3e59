"""The ledger's exceptions.

Three kinds, because the daemon reacts differently to each: a :class:`LedgerUnavailable`
is temporary (full disk, read-only file, I/O error: stop accepting LOCK, retry later,
nothing committed is lost); a :class:`LedgerMismatch` means the file is not this table's
ledger or was written by newer software (refuse to start); any other :class:`LedgerError`
is a bug or a damaged ledger (stop and call for an audit).
"""

from __future__ import annotations


class LedgerError(Exception):
    """The ledger refused an operation or found itself inconsistent."""


class LedgerUnavailable(LedgerError):
    """The ledger cannot be written now (disk full, read-only, I/O error, locked).

    Nothing was committed by the failed call; the in-memory state is unchanged, so the
    same call may be retried once the cause is gone.
    """


class LedgerMismatch(LedgerError):
    """The file is another table's ledger, a newer schema, or not a ledger at all."""
