"""The storage port: what a ledger needs from the place its rows live (docs/architecture.md).

Both ledgers (a table's, :mod:`progressived.ledger.store`; the link's,
:mod:`progressived.link.store.ledger`) compute their rows without I/O (the plan: journal rows
with their hash chain, postings, balances, idempotency keys, a snapshot when due) and hand
them to a store, which writes them in ONE transaction and reads them back. Two adapters:

* :class:`progressived.storage.sqlite.SqliteStore` -- a file on this machine (WAL,
  ``synchronous=FULL``, the one-writer ``flock``), the table's and the link's default;
* :class:`progressived.storage.postgres.PostgresStore` -- a PostgreSQL database (psycopg 3),
  for a link ledger replicated by PostgreSQL itself (docs/link.md).

Both store the same rows and columns, so a chain written by one verifies on the other.

**The lease.** A database that several link controllers can reach needs more than a lock
file: a writer holds a *lease* (one row: holder, fencing token, expiry taken from the
database's own clock) and every write transaction carries it. :meth:`LedgerStore.write`
with ``fence=lease`` stores nothing and raises :class:`~progressived.storage.errors.Fenced`
unless, at that transaction's commit, the lease row still names that holder and token and
has not expired; a successful write also extends the lease by its term. :meth:`acquire`
takes a free, lapsed or released lease (or the holder's own) with the token + 1, so a
writer that was paused or cut off past its lease can never commit after another acquired
it. Both adapters keep the same lease rows and rules (the contract tests hold them to it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

ChainRow = tuple[int, str, str, str]
"""``seq, prev_hash, hash`` and the row's canonical text ``prev_hash|seq|at|...|data``
(:mod:`progressived.ledger.chain`), built by the database."""

JournalValues = tuple[
    int, str, str, int | None, int, str, str, str, str | None, str, str, str
]  # seq, at, table_id, round, seat, kind, category, actor, idem_key, data, hash, prev_hash

Statement = tuple[str, tuple[object, ...]]
"""An extra SQL statement run in a write's transaction (a table's link outbox rows)."""

LEASE = "writer"  # the one lease of a ledger: who may write it


@dataclass(frozen=True, slots=True)
class Lease:
    """A writer's hold on a ledger: who, its fencing token, and until when.

    ``expires_at`` is seconds since the epoch by the database's clock (on SQLite: this
    machine's); ``ttl_s`` is the term each write and :meth:`LedgerStore.renew` extend it by.
    """

    holder: str
    token: int
    expires_at: float
    ttl_s: float


class ChainPosition(Protocol):
    """A row of the hash chain named by its ``seq`` and ``hash`` (where a plan ends)."""

    @property
    def seq(self) -> int: ...

    @property
    def hash(self) -> str: ...


class Writable(Protocol):
    """The rows of one write transaction (:class:`progressived.ledger.plan.Plan`)."""

    @property
    def journal(self) -> Sequence[JournalValues]: ...

    @property
    def postings(self) -> Sequence[tuple[int, int, str, int]]: ...

    @property
    def balances(self) -> Sequence[tuple[str, int, int]]: ...  # account, units, last seq

    @property
    def keys(self) -> Sequence[tuple[str, int, int]]: ...  # idempotency key, first, last

    @property
    def outbox(self) -> Sequence[tuple[int, str, str, int, int]]: ...

    @property
    def snapshot(self) -> tuple[int, str, str] | None: ...  # seq, hash, state text

    @property
    def head(self) -> ChainPosition: ...


class LedgerStore(Protocol):
    """One open ledger store; one writer at a time (the ``flock``, or the lease)."""

    @property
    def where(self) -> str:
        """The file or the database, for messages (a URL without its password)."""
        ...

    @property
    def kind(self) -> str:
        """``sqlite`` or ``postgresql``."""
        ...

    def meta(self) -> dict[str, str]:
        """The ``meta`` table."""
        ...

    def last(self) -> tuple[int, str]:
        """The last journal row's ``(seq, hash)``; ``(0, GENESIS)`` for an empty journal."""
        ...

    def balances(self) -> dict[str, int]:
        """The ``balances`` table."""
        ...

    def snapshots(self, limit: int) -> list[tuple[int, str, str | None]]:
        """The newest ``limit`` snapshots as ``(seq, hash, the journal's hash at seq)``."""
        ...

    def snapshot_text(self, seq: int) -> str:
        """The ``state`` of the snapshot at row ``seq``."""
        ...

    def chain_rows(self, after: int, upto: int) -> Iterator[ChainRow]:
        """Rows ``after+1..upto`` for the chain checker, in order."""
        ...

    def rows(self, after: int) -> Iterator[tuple[int, str, str]]:
        """``(seq, kind, data)`` of every row after ``after``, in order."""
        ...

    def write(
        self,
        rows: Writable,
        *,
        meta: Mapping[str, str] | None = None,
        fence: Lease | None = None,
    ) -> None:
        """Insert ``rows`` (and set ``meta`` keys) in ONE durable transaction; with
        ``fence``, only while that lease is current (else :class:`Fenced`, nothing
        stored). Raises :class:`LedgerUnavailable` when it cannot write now: nothing was
        stored -- or, for a connection lost during COMMIT, it is not known whether it was:
        re-read :meth:`last` before anything else."""
        ...

    def acquire(self, holder: str, ttl_s: float) -> Lease:
        """The lease for ``holder`` with the next fencing token; :class:`LeaseHeld` while
        another holder's lease is valid."""
        ...

    def renew(self, lease: Lease) -> Lease:
        """Extend a current lease by its term; :class:`Fenced` if it is no longer current."""
        ...

    def renew_aside(self, lease: Lease) -> Lease:
        """:meth:`renew` on a connection of its own: for a holder whose connection is busy
        reading (rebuilding its state after acquiring), so that a rebuild longer than the
        term does not lose the lease it was started under."""
        ...

    def release(self, lease: Lease) -> None:
        """End a current lease now (its token stays used); nothing if it is not current."""
        ...

    def lease(self) -> Lease | None:
        """The lease row as the database holds it now (``None``: never acquired)."""
        ...

    def remove(self) -> None:
        """Close and remove a ledger this store was making when making it failed (a new
        file, or the tables of a database it initialised), so ``init`` can be retried."""
        ...

    def file_problem(self) -> str | None:
        """Why the store's file is no longer the one at its path (deleted or replaced under
        the running process), or ``None``; a database has no such file (always ``None``)."""
        ...

    def close(self) -> None: ...
