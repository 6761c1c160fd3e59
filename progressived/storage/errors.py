"""The ledger's exceptions.

The daemon reacts differently to each kind: a :class:`LedgerUnavailable` is temporary
(full disk, read-only file, I/O error: stop accepting LOCK, retry later, nothing committed
is lost); a :class:`LedgerMismatch` means the file is not this table's ledger or was
written by newer software (refuse to start); a :class:`LedgerMissing` means there is no
ledger where the configuration says (refuse to start: a missing ledger is never an empty
one, or the players' accumulated meter would silently restart at the seed); a
:class:`LedgerExists` refuses to initialise over a ledger; any other :class:`LedgerError`
is a bug or a damaged ledger (stop and call for an audit). :class:`Fenced` and
:class:`LeaseHeld` are about the lease a writer holds on a shared ledger
(:mod:`progressived.storage.port`).

They live in the storage layer because both storage adapters (SQLite, PostgreSQL) raise them;
:mod:`progressived.ledger.errors` re-exports them for the ledger's callers.
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


class Fenced(LedgerError):
    """A write carried a lease that is no longer the current one: another writer acquired
    the ledger (the fencing token moved on), the lease lapsed, or it was released.

    Nothing of that write was stored. The writer is no longer the ledger's writer and must
    stop writing (the link controller stops: another one serves the link).
    """


class LeaseHeld(LedgerUnavailable):
    """Another holder's lease on the ledger is still valid: it may not be acquired now
    (try again once it lapses). ``holder``, ``token`` and ``expires_in_s`` say whose it is
    and for how much longer (by the store's clock), so a standby can show and time it."""

    def __init__(
        self, message: str, *, holder: str = "", token: int = 0, expires_in_s: float = 0.0
    ) -> None:
        super().__init__(message)
        self.holder, self.token, self.expires_in_s = holder, token, expires_in_s


def one_line(exc: BaseException) -> str:
    """An error's text on one line (libpq's messages span several: an operator's fault is
    one clear line)."""
    return " ".join(str(exc).split())
