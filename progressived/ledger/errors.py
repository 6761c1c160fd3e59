"""The ledger's exceptions.

The daemon reacts differently to each kind: a :class:`LedgerUnavailable` is temporary
(full disk, read-only file, I/O error: stop accepting LOCK, retry later, nothing committed
is lost); a :class:`LedgerMismatch` means the file is not this table's ledger or was
written by newer software (refuse to start); a :class:`LedgerMissing` means there is no
ledger where the configuration says (refuse to start: a missing ledger is never an empty
one, or the players' accumulated meter would silently restart at the seed); a
:class:`LedgerExists` refuses to initialise over a ledger; any other :class:`LedgerError`
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


class LedgerMissing(LedgerError):
    """No ledger at the path (or its directory is missing, or the file is empty).

    Only ``progressived init`` creates a table's ledger, and journals who did it.
    """


class LedgerExists(LedgerError):
    """``progressived init`` found a file where it was to create a new ledger."""
