"""The ledger file as it stands: one connection, its lock, the committed head, and reads.

Split from :mod:`progressived.ledger.store` (which opens, recovers and writes) so that the
writer module stays about how rows get in, and this one about what is held between writes:
the open file (:class:`~progressived.storage.sqlite.SqliteStore`: the connection and the
``flock``), the head in memory (state, balances, last row and hash, rows since the last
snapshot) that only a successful write moves, and the reads the daemon makes on the
writer's connection. Nothing here writes a row.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

from progressived.core.params import TableParams
from progressived.engine.state import TableState
from progressived.ledger import chain, link_outbox, slip_reads
from progressived.ledger.link_outbox import LinkMessageRow, LinkOutboxDepth
from progressived.ledger.recovery import Recovery
from progressived.ledger.rows import AppendResult, OutboxRow
from progressived.ledger.slip_reads import PrintJob
from progressived.slips.issue import Series
from progressived.storage.sqlite import SqliteStore, translate

_T = TypeVar("_T")

if TYPE_CHECKING:
    from progressived.ledger.slips import SlipIssuer


class LedgerHandle:
    """The open ledger's connection, lock and committed head (:class:`Ledger` writes)."""

    def __init__(self, store: SqliteStore, params: TableParams, snapshot_every: int) -> None:
        self._store = store
        self._path = store.path
        self._conn = store.conn
        self._params = params
        self._table_id = params.table_id
        self._snapshot_every = snapshot_every
        self._state = TableState()
        self._balances: dict[str, int] = {}
        self._head_seq = 0
        self._head_hash = chain.GENESIS
        self._since_snapshot = 0
        self._stale = False  # a write failed: re-read the head before the next one
        self._mutex = threading.RLock()  # the daemon may write from executor threads
        self.recovery = Recovery(0, 0, 0.0)
        # Payout slips (docs/slips.md): journaled with their awards once an issuer is set.
        self.slips: SlipIssuer | None = None
        self._slip_series = Series()

    # ------------------------------------------------------------------ reading

    @property
    def path(self) -> Path:
        return self._path

    @property
    def state(self) -> TableState:
        """The engine state after the last committed row."""
        return self._state

    @property
    def head_seq(self) -> int:
        return self._head_seq

    @property
    def head_hash(self) -> str:
        return self._head_hash

    @property
    def balances(self) -> Mapping[str, int]:
        """The balances table as committed (a copy)."""
        return dict(self._balances)

    def lookup(self, idempotency_key: str) -> AppendResult | None:
        """The first result of the call that carried ``idempotency_key``, if any."""
        self._check_open()
        try:
            row = self._conn.execute(
                "SELECT first_seq, last_seq FROM idempotency WHERE key = ?", (idempotency_key,)
            ).fetchone()
        except sqlite3.Error as exc:
            raise translate(exc, self._path) from None
        return None if row is None else AppendResult(int(row[0]), int(row[1]), duplicate=True)

    def outbox_pending(self, limit: int = 100) -> list[OutboxRow]:
        self._check_open()
        try:
            rows = self._conn.execute(
                "SELECT id, seq, topic, payload, qos, retain FROM outbox ORDER BY id LIMIT ?",
                (limit,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise translate(exc, self._path) from None
        return [
            OutboxRow(int(i), int(s), str(t), str(p), int(q), bool(r)) for i, s, t, p, q, r in rows
        ]

    def link_outbox(self, after_seq: int = 0) -> list[LinkMessageRow]:
        """The link outbox's messages after ``after_seq``, in sequence order."""
        return self._query(link_outbox.pending, after_seq)

    def link_message(self, seq: int) -> LinkMessageRow | None:
        """The link outbox's message of sequence ``seq``, if it still waits for its result."""
        return self._query(link_outbox.message, seq)

    def link_outbox_depth(self) -> LinkOutboxDepth:
        """How many messages wait for the link, and the oldest one's payload."""
        return self._query(link_outbox.depth)

    def link_sent_since(self, round_no: int) -> list[dict[str, Any]]:
        """The ``link_sent`` rows' data from round ``round_no`` on (and the last one)."""
        return self._query(link_outbox.sent_since, round_no)

    def slip_print_queue(self) -> list[PrintJob]:
        """The payout slip copies waiting to print (docs/slips.md, "Printing")."""
        return self._query(slip_reads.print_queue)

    def slip_rows_head(self) -> int:
        """The last payout slip row's ``seq`` (0 when none)."""
        return self._query(slip_reads.slip_rows_head)

    def slip_copies(self, serial: str) -> dict[str, int]:
        """``slip_issued`` and ``slip_reprint`` rows naming ``serial``, counted by kind."""
        return self._query(slip_reads.slip_copies, serial)

    def _query(self, read: Callable[..., _T], *args: Any) -> _T:
        """A read on the writer's connection, under the writer's mutex."""
        with self._mutex:
            self._check_open()
            try:
                return read(self._conn, *args)
            except sqlite3.Error as exc:
                raise translate(exc, self._path) from None

    def checkpoint(self) -> None:
        """Fold the WAL back into the database and truncate it (call when idle)."""
        self._check_open()
        try:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error as exc:
            raise translate(exc, self._path) from None

    def file_problem(self) -> str | None:
        """Why the ledger's path no longer names the open file (deleted or replaced under
        the running process), or ``None``."""
        return self._store.file_problem()

    def save_copy(self, target: Path) -> None:
        """Write every committed row as this connection sees it (the WAL's too) to
        ``target``: the rescue of a ledger whose file was deleted or replaced under the
        daemon (:meth:`~progressived.storage.sqlite.SqliteStore.save_copy`)."""
        with self._mutex:
            self._store.save_copy(target)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        self._store.check_open()
