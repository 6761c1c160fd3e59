"""What the link controller needs from its ledger: a small port (docs/link.md).

:class:`progressived.link.store.ledger.LinkLedger` implements it (helper contract, section 1); the
controller takes any implementation by injection, so its tests can run on a stand-in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from progressived.link.core.messages import LedgerHead
from progressived.link.core.state import BookState, Step


class LinkJournal(Protocol):
    """The link ledger as the controller uses it (one writer, called from one thread)."""

    book: BookState  # the book as of the last committed transaction
    head: LedgerHead  # the ledger's last committed (seq, hash)

    def commit(self, steps: Sequence[tuple[Step, int]]) -> None:
        """Journal a batch of book steps (step, receive time in ms) in ONE transaction.

        Each step's ``Applied`` events become ``link_applied`` rows (with their postings and
        the table's new high-water mark), its ``LinkRefused`` events ``link_refused`` rows; then
        ``book`` is the last step's state and ``head`` the new head. Raises
        :class:`~progressived.ledger.LedgerUnavailable` on a disk, lock or connection error,
        leaving ``book`` and ``head`` as they were (after a lost connection the commit may
        have happened: the next call re-reads the ledger first), and
        :class:`~progressived.ledger.Fenced` when another controller holds the ledger now.
        """
        ...

    def file_problem(self) -> str | None:
        """Why the ledger's path no longer names the file this journal has open (deleted or
        replaced under the running controller), or ``None`` (always, in a database)."""
        ...

    def save_copy(self, target: str) -> None:
        """Save every committed row to the file ``target`` (a SQLite ledger whose file is
        gone; a database has none to save: :class:`~progressived.ledger.LedgerError`)."""
        ...

    def renew(self) -> None:
        """Keep the ledger's lease while no batch is committed (a ledger in a database;
        a no-op without a lease). Raises :class:`~progressived.ledger.Fenced` when another
        controller holds the ledger now, :class:`~progressived.ledger.LedgerUnavailable`
        when the database cannot be reached."""
        ...

    def close(self) -> None: ...
