"""The ledger: an append-only, double-entry, hash-chained journal in SQLite (WAL).

One process writes (an exclusive ``flock`` on ``PATH.lock`` makes sure of it). A write is
two steps: :func:`progressived.ledger.plan.plan` (pure) turns the calls of one transaction
into rows, postings, balance changes and hashes, refusing bad input before SQLite is
touched; the storage port's SQLite adapter (:class:`progressived.storage.sqlite.SqliteStore`)
inserts them in one ``BEGIN IMMEDIATE`` transaction under ``synchronous=FULL``, so a call
that returned has been fsynced: that is what lets the daemon acknowledge an event only
after ``append`` returns. The in-memory head (state, balances, last row and hash) only
moves after COMMIT succeeded, so a failed write leaves the object exactly as it was and the
call can be retried. Opening recovers the head from the latest snapshot
(:mod:`progressived.ledger.recovery`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from progressived.core.params import TableParams
from progressived.engine.core import initial_state, open_meters
from progressived.engine.events import Event
from progressived.engine.state import TableState
from progressived.ledger import conversion, opening, parameters, plan
from progressived.ledger.commit import commit
from progressived.ledger.errors import (
    LedgerError,
    LedgerMismatch,
    LedgerUnavailable,
)
from progressived.ledger.handle import LedgerHandle
from progressived.ledger.link_outbox import LinkOutboxChange, statement
from progressived.ledger.plan import SNAPSHOT_EVERY, CommittedHead
from progressived.ledger.readonly import connect_readonly
from progressived.ledger.recovery import Recovery, recover
from progressived.ledger.rows import (
    CATEGORIES,
    AppendResult,
    Batch,
    JournalRow,
    OutboxFn,
    OutboxMessage,
    OutboxRow,
)
from progressived.ledger.rows import Record as _Record
from progressived.ledger.slips import SlipIssuer, recover_series, void_rows, with_slips
from progressived.slips.slip import Slip
from progressived.storage.sqlite import translate

__all__ = [  # re-exported: the names callers imported from here before the split
    "AppendResult",
    "Batch",
    "JournalRow",
    "Ledger",
    "OutboxFn",
    "OutboxMessage",
    "OutboxRow",
    "Recovery",
    "connect_readonly",
    "translate",
]


class Ledger(LedgerHandle):
    """The table's ledger. Use :meth:`open`; one instance (and one process) writes.

    What it holds between writes (connection, lock, head) and its reads are
    :class:`~progressived.ledger.handle.LedgerHandle`'s; opening and writing are here.
    """

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        path: Path,
        params: TableParams,
        *,
        at: str,
        software: str = "",
        snapshot_every: int = SNAPSHOT_EVERY,
        create: bool = True,
    ) -> Ledger:
        """Open the ledger at ``path`` for ``params.table_id`` and recover.

        With ``create=False`` (the daemon) the ledger must already be there: a missing
        directory, a missing file or a file with no ledger in it raises
        :class:`LedgerMissing` and nothing is written, because a missing ledger is never
        an empty one (the meter would silently restart at the seed). With ``create=True``
        (tests, simulations) a new file gets the schema, a ``ledger_created`` row and the
        ``MeterOpened`` events of :func:`initial_state`; a meter added to ``params`` since
        is opened the same way. Raises :class:`LedgerMismatch` for another table's ledger,
        a newer schema or a file that is not a ledger, its subclass
        :class:`~progressived.ledger.conversion.ConversionRefused` when ``params`` make
        linked, or drop, a local meter that holds money in it, :class:`LedgerUnavailable`
        when it cannot be written.
        """
        return cls._open(
            Path(path), params, at, software, snapshot_every, "any" if create else "existing", {}
        )

    @classmethod
    def create(
        cls,
        path: Path,
        params: TableParams,
        *,
        at: str,
        software: str = "",
        created_by: Mapping[str, str],
        snapshot_every: int = SNAPSHOT_EVERY,
    ) -> Ledger:
        """Create a table's new ledger (``progressived init``), journaling who and when.

        ``created_by`` (e.g. the operator id and the OS user) goes into the
        ``ledger_created`` row, whose ``at`` is when. Refuses any existing file
        (:class:`LedgerExists`) and a missing directory (:class:`LedgerMissing`: a typo in
        the path must not quietly make a new tree).
        """
        return cls._open(Path(path), params, at, software, snapshot_every, "new", created_by)

    @classmethod
    def _open(
        cls,
        path: Path,
        params: TableParams,
        at: str,
        software: str,
        snapshot_every: int,
        presence: str,
        created_by: Mapping[str, str],
    ) -> Ledger:
        """``presence``: ``any`` (create if missing), ``existing`` or ``new``."""
        opening.check_text("table id", params.table_id, at)
        store, meta = opening.open_file(path, params.table_id, at, software, presence)
        ledger = cls(store, params, snapshot_every)
        try:
            ledger._setup(at, software, created_by, meta)
        except BaseException:
            if presence == "new":  # a half-made ledger must not block the retry of init
                store.remove()
            else:
                ledger.close()
            raise
        return ledger

    def _setup(
        self,
        at: str,
        software: str,
        created_by: Mapping[str, str],
        meta: Mapping[str, str],
    ) -> None:
        if meta.get("table_id") != self._table_id:
            raise LedgerMismatch(
                f"ledger {self._path} belongs to table {meta.get('table_id')!r}, "
                f"not {self._table_id!r}: refusing to open it"
            )
        self._recover()
        if self._head_seq == 0:
            start = initial_state(self._params, at)
            self._write(
                [
                    opening.created_row(self._params, at, software, created_by),
                    Batch(start.events, start.state, at),
                ]
            )
        else:
            # Before any row of this start: a configuration that would abandon a local
            # meter's money is refused with nothing journaled (ConversionRefused, exit 4).
            conversion.check(self._conn, self._path, self._state, self._params)
            self._record_parameter_changes(at)
            self._open_new_meters(at)

    def _record_parameter_changes(self, at: str) -> None:
        """Journal how ``params`` differ from the last recorded parameters, if they do."""
        if detail := parameters.at_open(self._conn, self._params, self._path):
            self.record("parameter_changed", detail, at=at, actor="system")

    def _open_new_meters(self, at: str) -> None:
        """Fund meters configured since the ledger was created (a recorded parameter change)."""
        opened = open_meters(self._params, self._state, at)
        events, state = opened.events, opened.state
        if events:
            self.append(events, state, at=at, actor="system")

    def _recover(self) -> None:
        """Rebuild the engine state: the latest snapshot plus the engine rows after it."""
        head, self.recovery = recover(self._conn, self._path)
        self._head_seq, self._head_hash = head.seq, head.hash
        self._balances = dict(head.balances)
        self._state = head.state
        self._since_snapshot = head.since_snapshot
        try:  # the payout slips' series: the last number issued (docs/slips.md)
            self._slip_series = recover_series(self._conn)
        except sqlite3.Error as exc:
            raise translate(exc, self._path) from None

    # ------------------------------------------------------------------ writing

    def issue_slips(self, issuer: SlipIssuer | None) -> None:
        """From now on, journal a payout slip with every award (``None``: no slips)."""
        with self._mutex:
            self.slips = issuer

    def void_slip(
        self, serial: str, *, reason: str, by: str, at: str, reissue: bool = False
    ) -> Slip | None:
        """Void slip ``serial`` (an operator's, ``by``, for ``reason``) and, with
        ``reissue``, issue it again under the next serial, in one transaction; returns the
        new slip. Raises :class:`~progressived.ledger.slips.SlipRefused` for an unknown or
        void serial."""
        with self._mutex:
            self._check_open()
            if self.slips is None:
                raise LedgerError("this ledger issues no slips")
            if self._stale:  # as _write: the series from the file, in case a commit landed
                self._recover()
                self._stale = False
            try:
                rows, after, again = void_rows(
                    self._conn,
                    self.slips,
                    self._slip_series,
                    serial=serial,
                    reason=reason,
                    by=by,
                    reissue=reissue,
                    at=at,
                )
            except sqlite3.Error as exc:
                raise translate(exc, self._path) from None
            self._write(rows)
            self._slip_series = after  # the reissue's number, now committed
            return again

    def append(
        self,
        events: Sequence[Event],
        state: TableState,
        *,
        at: str,
        actor: str = "",
        idempotency_key: str | None = None,
        outbox: OutboxFn | None = None,
    ) -> AppendResult:
        """Journal ``events`` (``state`` is the engine state after them) in one transaction.

        A second call with an ``idempotency_key`` already seen writes nothing and returns
        the first call's result with ``duplicate=True``.
        """
        return self.append_many([Batch(events, state, at, actor, idempotency_key, outbox)])[0]

    def append_many(self, batches: Sequence[Batch]) -> list[AppendResult]:
        """Group commit: several appends in one transaction (one fsync)."""
        return self._write(batches)

    def transact(
        self, items: Sequence[Batch | _Record], link: Sequence[LinkOutboxChange] = ()
    ) -> list[AppendResult]:
        """Appends and records, in this order, in one transaction (one fsync, all or none);
        the ``link`` outbox's changes commit or roll back with them."""
        return self._write(items, link)

    def record(
        self,
        kind: str,
        detail: Mapping[str, Any],
        *,
        at: str,
        actor: str = "",
        round: int | None = None,
        seat: int = 0,
        idempotency_key: str | None = None,
        outbox: OutboxFn | None = None,
        category: str | None = None,
    ) -> AppendResult:
        """Journal a system, operator or parameter event (no money, no state change).

        ``category`` defaults from ``kind``: ``parameter_changed`` is a parameter change,
        ``operator_*`` an operator action, anything else a system event.
        """
        if category is None:
            if kind == "parameter_changed":
                category = "parameter"
            elif kind.startswith("operator"):
                category = "operator"
            else:
                category = "system"
        if category not in CATEGORIES or category == "engine":
            raise LedgerError("record(): category must be system, operator or parameter")
        rec = _Record(
            kind=kind,
            detail=detail,
            at=at,
            actor=actor,
            round=round,
            seat=seat,
            category=category,
            idempotency_key=idempotency_key,
            outbox=outbox,
        )
        return self._write([rec])[0]

    def outbox_ack(self, ids: Sequence[int]) -> None:
        """Forget outbox messages that were published.

        Committed without its own fsync (``synchronous=NORMAL`` for this transaction; the
        next journal commit, at FULL, makes it durable): losing an acknowledgement to a power
        cut only publishes the message again, with the same ledger ``seq``, which subscribers
        recognise. The journal's own commits stay FULL.
        """
        if not ids:
            return
        with self._mutex:
            self._check_open()
            self._conn.execute("PRAGMA synchronous = NORMAL")
            try:
                with self._store.transaction():
                    self._conn.executemany(
                        "DELETE FROM outbox WHERE id = ?", [(int(i),) for i in ids]
                    )
            finally:
                with suppress(sqlite3.Error):
                    self._conn.execute("PRAGMA synchronous = FULL")

    # ------------------------------------------------------------------ internals

    def _write(
        self, items: Sequence[Batch | _Record], link: Sequence[LinkOutboxChange] = ()
    ) -> list[AppendResult]:
        with self._mutex:
            if self._stale:
                # The last write failed (disk full, I/O error). If the failure came after
                # SQLite had made the commit durable, the file is ahead of memory: start
                # again from what the file holds. Callers re-read ``state`` after an error.
                self._recover()
                self._stale = False
            try:
                return self._write_locked(items, link)
            except LedgerUnavailable:
                self._stale = True
                raise

    def _write_locked(
        self, items: Sequence[Batch | _Record], link: Sequence[LinkOutboxChange] = ()
    ) -> list[AppendResult]:
        """Plan the rows (pure; refuses bad input), commit them, then move the head."""
        self._check_open()
        head = CommittedHead(
            self._head_seq, self._head_hash, self._balances, self._state, self._since_snapshot
        )
        first = self._store.known_keys(item.idempotency_key for item in items)
        known = {key: AppendResult(*seqs) for key, seqs in first.items()}
        series, mine = self._slip_series, list[int](range(len(items)))
        if self.slips is not None:  # payout slips after their awards' rows (docs/slips.md)
            items, series, mine = with_slips(self.slips, items, self._state, series, known)
        try:
            rows = plan.plan(
                items, head, known, table_id=self._table_id, snapshot_every=self._snapshot_every
            )
        except plan.AppendRefused as exc:
            raise LedgerError(f"ledger {self._path}: refused: {exc}") from None
        results = [rows.results[i] for i in mine]  # the slips' rows are not the caller's
        if rows.empty:
            return results
        commit(self._store, rows, [statement(change) for change in link])
        after = rows.head
        self._head_seq, self._head_hash = after.seq, after.hash
        self._balances = dict(after.balances)
        self._state = after.state
        self._since_snapshot = after.since_snapshot
        self._slip_series = series
        return results
