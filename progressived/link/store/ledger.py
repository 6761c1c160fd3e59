"""The link controller's ledger: the book's events, durable, in the table ledger's format.

One ledger per link, written by one controller, behind the storage port
(:mod:`progressived.storage.port`): a SQLite file (the one-writer ``PATH.lock``) or a
PostgreSQL database (a lease with a fencing token that every write carries), with the table
ledger's rows, hash chain and plan (:mod:`progressived.ledger.plan`). ``meta`` says
``ledger_kind = link``. The rows are :mod:`progressived.link.core.journal`'s. Every
:data:`~progressived.link.core.snapshot.EVERY` rows a commit also writes a snapshot of the
book (:mod:`progressived.link.core.snapshot`) in the same transaction. Opening loads the
latest snapshot that names its row's hash and replays the ``link_applied`` rows after it
through the pure book, checking each stored result and postings, so a restarted link answers
a repeat exactly as before; with no usable snapshot it replays every row (and logs why).
:meth:`LinkLedger.commit` journals a batch of book steps in one transaction (group commit);
a ``link_applied`` row's idempotency key is ``TABLE:SEQ``, so the database itself refuses a
table's sequence applied twice.

**A write whose outcome is unknown** (the connection to PostgreSQL was lost during COMMIT,
the primary died): :meth:`commit` raises :class:`LedgerUnavailable` and the ledger is
*stale*; the next call first re-reads the head from the store (reconnecting: a multi-host URL
finds the new primary) and, if the store moved on, rebuilds the book from it. The batch
either is in the rebuilt book (its messages are then repeats, answered from the stored
results) or is not (they are applied anew): the controller answers nothing in between, so
"replies only after commit" holds across a failover.

Micro-benchmark: ``python -m bench.link_ledger [--sqlite]`` (:meth:`LinkLedger.commit` in
PostgreSQL, or SQLite, against bare inserts of the rows it wrote; docs/performance.md,
"Micro-benchmarks").
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog

from progressived.ledger import chain, plan, schema
from progressived.ledger.commit import translate
from progressived.ledger.errors import (
    LedgerError,
    LedgerMissing,
    LedgerUnavailable,
)
from progressived.ledger.opening import check_text
from progressived.ledger.readonly import connect_untouched
from progressived.ledger.rows import Record, nonzero
from progressived.link.core import book, journal, snapshot
from progressived.link.core import params as lp
from progressived.link.core.messages import LedgerHead
from progressived.link.core.state import BookState, Step
from progressived.link.store.opening import check_meta, open_store
from progressived.link.store.recovery import NEVER, Recovery, recover
from progressived.link.store.rows import record, records
from progressived.runtime.clock import utc_now
from progressived.storage.location import Location, shown
from progressived.storage.port import Lease, LedgerStore
from progressived.storage.sqlite import SqliteStore

__all__ = ["LinkLedger", "Recovery", "records"]

log = structlog.get_logger("progressived.link.ledger")


class LinkLedger:
    """The link's ledger. :meth:`create` once, then :meth:`open`; one controller writes."""

    def __init__(
        self, store: LedgerStore, params: lp.LinkParams, snapshot_every: int = snapshot.EVERY
    ) -> None:
        self.store = store
        self.where = store.where
        self.params = params
        self.snapshot_every = snapshot_every
        self.recovery = Recovery(0, 0, 0.0)
        self.lease: Lease | None = None  # carried by every write when held
        self.lease_started = 0.0  # monotonic, just before the lease was last acquired/renewed
        self._since_snapshot = 0
        self._closed = False
        self._stale = False
        self._balances: dict[str, int] = {}
        self.book = BookState()
        self.head = LedgerHead(0, chain.GENESIS)
        self._recorded: dict[str, Any] = {}

    # ------------------------------------------------------------------ creating, opening

    @classmethod
    def create(
        cls,
        location: Location,
        params: lp.LinkParams,
        *,
        at: str,
        software: str,
        created_by: Mapping[str, str] | None = None,
        snapshot_every: int = snapshot.EVERY,
        password: str | None = None,
    ) -> None:
        """A new link ledger: ``link_created`` and a ``meter_opened`` per meter.

        Refuses an existing ledger (:class:`LedgerExists`: a file, or an initialised
        database) and a missing directory (:class:`LedgerMissing`); a half-made one is
        removed.
        """
        lp.validate(params)
        who = dict(created_by or {})
        ledger = cls._connect(location, params, at, software, "new", snapshot_every, password)
        try:
            detail = {**journal.params_to_dict(params), "software": software, **who}
            actor = who.get("operator") or who.get("os_user") or "system"
            rows = [record("link_created", detail, at, actor, "system")]
            for spec in params.meters:
                data, postings = journal.meter_opened(spec)
                rows.append(record("meter_opened", data, at, "system", "engine", None, postings))
            kind = {"ledger_kind": journal.LEDGER_KIND, "link_id": params.link_id}
            ledger._write(rows, book.open_book(params), journal.params_to_dict(params), kind)
        except BaseException:
            ledger.store.remove()
            raise
        ledger.close()

    @classmethod
    def open(
        cls,
        location: Location,
        params: lp.LinkParams,
        *,
        at: str | None = None,
        software: str = "",
        snapshot_every: int = snapshot.EVERY,
        holder: str | None = None,
        lease_s: float = 10.0,
        password: str | None = None,
    ) -> LinkLedger:
        """Open: the latest snapshot plus the rows after it, replayed and checked (every row
        without a usable snapshot); journal changed parameters (``at``: now).
        :attr:`recovery` says how. With ``holder``, first acquire the store's lease for
        ``lease_s`` seconds (:class:`LeaseHeld` while another holder's is valid): every
        write then carries it, and it is read from the store only after it is held, so
        whatever a previous holder committed is in the book. ``password``: a database's,
        when libpq's own sources (``PGPASSFILE``) do not hold it.

        :class:`LedgerMissing` for a missing or empty ledger, :class:`LedgerMismatch` for a
        table ledger, another link's or a foreign file, or a row that does not replay.
        """
        lp.validate(params)
        at = at or utc_now()
        ledger = cls._connect(
            location, params, at, software, "existing", snapshot_every, password
        )
        try:
            if holder is not None:
                ledger.lease_started = time.monotonic()
                ledger.lease = ledger.store.acquire(holder, lease_s)
            ledger._load()
            ledger._record_changes(at)
        except BaseException:
            ledger.close()
            raise
        return ledger

    @classmethod
    def replay_readonly(cls, path: Path, params: lp.LinkParams) -> LinkLedger:
        """Replay and check the ledger as :meth:`open` does, writing nothing: no lock, no
        file beside it, no row (``progressived link --check``, also while the controller
        runs). Only :attr:`head`, :attr:`book` and :attr:`recovery` are for use; close it.

        The same refusals as :meth:`open`: :class:`LedgerMissing` for an empty ledger,
        :class:`LedgerMismatch` for another link's, a table's or a row that does not replay.
        """
        lp.validate(params)
        path = Path(path)
        try:
            conn = connect_untouched(path)
            version = schema.file_version(conn)
        except sqlite3.Error as exc:
            raise translate(exc, path) from None
        ledger = cls(SqliteStore(path, conn, lock_fd=None), params)
        try:
            schema.check_supported(version)
            if version == 0:
                raise LedgerMissing(f"link ledger {path} is empty: it was never initialised")
            try:
                meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            except sqlite3.Error as exc:
                raise translate(exc, path) from None
            check_meta(str(path), {str(k): str(v) for k, v in meta.items()}, params.link_id)
            ledger._load()
        except BaseException:
            ledger.close()
            raise
        return ledger

    @classmethod
    def _connect(
        cls,
        location: Location,
        params: lp.LinkParams,
        at: str,
        software: str,
        presence: str,
        snapshot_every: int,
        password: str | None = None,
    ) -> LinkLedger:
        check_text("link id", params.link_id, at)
        if snapshot_every < 1:
            raise LedgerError(f"snapshot_every must be at least 1, not {snapshot_every}")
        store, meta = open_store(
            location, params.link_id, at, software, presence, password=password
        )
        if presence == "existing":
            try:
                check_meta(shown(location), meta, params.link_id)
            except BaseException:
                store.close()
                raise
        return cls(store, params, snapshot_every)

    def _load(self) -> None:
        """Rebuild the book from the store (:func:`~progressived.link.store.recovery.recover`)."""
        found = recover(self.store, self.snapshot_every, self._keep_lease)
        self.book, self.head, self.recovery = found.book, found.head, found.recovery
        self._balances, self._recorded = found.balances, found.recorded
        self._since_snapshot = found.since_snapshot

    def _keep_lease(self) -> None:
        """During a rebuild: renew a held lease once a third of its term has passed (on a
        connection of its own: this one is streaming the rows)."""
        if self.lease is None or time.monotonic() - self.lease_started < self.lease.ttl_s / 3:
            return
        started = time.monotonic()
        self.lease = self.store.renew_aside(self.lease)
        self.lease_started = started

    def _record_changes(self, at: str) -> None:
        detail = journal.changed_detail(self._recorded, self.params)
        if detail is None:
            return
        rows = [record("parameter_changed", detail, at, "system", "parameter")]
        state = self.book
        have = {m["id"] for m in self._recorded.get("meters", [])}
        for spec in self.params.meters:
            if spec.id not in have and spec.id not in state.epochs:
                data, postings = journal.meter_opened(spec)
                rows.append(record("meter_opened", data, at, "system", "engine", None, postings))
                state = journal.with_meters(state, postings, spec.id)
        recorded = journal.params_to_dict(self.params)
        self._write(rows, state, recorded)
        self._recorded = recorded

    # ------------------------------------------------------------------ writing

    def commit(self, steps: Sequence[tuple[Step, int]]) -> None:
        """Journal a batch of book steps ``(step, at_ms)`` in ONE transaction.

        Each step must follow the one before (the first follows :attr:`book`). Afterwards
        :attr:`book` is the last step's state and :attr:`head` the new last row. On any
        error nothing moved (:class:`LedgerUnavailable`: decide the batch again later from
        :attr:`book`; :class:`Fenced`: another controller holds the ledger now, stop
        writing). After a failed commit the next call first re-reads the store's head: if
        the failed commit had reached it after all, the book is rebuilt from the store and
        the call raises :class:`LedgerUnavailable` instead of committing steps decided from
        the old book.
        """
        if not steps:
            return
        self._write(records(steps), steps[-1][0].state)

    def file_problem(self) -> str | None:
        return self.store.file_problem()

    def save_copy(self, target: str) -> None:
        if not isinstance(self.store, SqliteStore):
            raise LedgerError(f"ledger {self.where} is in a database: no file to save")
        self.store.save_copy(Path(target))

    def renew(self) -> None:
        """Extend the lease while idle (every write extends it too); :class:`Fenced` if it
        is no longer this ledger's. Nothing without a lease."""
        if self._closed:
            raise LedgerError(f"ledger {self.where} is closed")
        if self.lease is not None:
            self.lease = self.store.renew(self.lease)

    def _write(
        self,
        rows: list[Record],
        state: BookState,
        recorded: Mapping[str, Any] | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> None:
        """Commit ``rows`` leading to ``state`` (``recorded``: the link parameters as last
        recorded once they are written, when these rows change them; ``meta``: keys set in
        the same transaction), with a snapshot of ``state`` when :attr:`snapshot_every` rows
        have passed since the last one."""
        if self._closed:
            raise LedgerError(f"ledger {self.where} is closed")
        if self._stale and self._reload():
            raise LedgerUnavailable(
                f"ledger {self.where}: the commit that failed had reached the store after "
                "all; the book was read again from it: decide the batch again"
            )
        if not rows:
            self.book = state
            return
        head = plan.CommittedHead(self.head.seq, self.head.hash, self._balances)
        try:
            planned = plan.plan(rows, head, {}, table_id=self.params.link_id, snapshot_every=NEVER)
        except plan.AppendRefused as exc:
            raise LedgerError(f"ledger {self.where}: refused: {exc}") from None
        if any(r.duplicate for r in planned.results):
            raise LedgerError(f"ledger {self.where}: a table sequence twice in one batch")
        if nonzero(planned.head.balances) != nonzero(state.balances):
            raise LedgerError(
                f"ledger {self.where}: refused: the book's balances differ from the postings"
            )
        since = self._since_snapshot + len(planned.journal)
        if since >= self.snapshot_every:
            try:
                text = snapshot.dumps(self._recorded if recorded is None else recorded, state)
            except snapshot.SnapshotError as exc:
                raise LedgerError(f"ledger {self.where}: refused: {exc}") from None
            planned = dataclasses.replace(
                planned, snapshot=(planned.head.seq, planned.head.hash, text)
            )
            since = 0
        try:
            self.store.write(planned, meta=meta, fence=self.lease)
        except LedgerUnavailable:
            self._stale = True  # the commit may have reached the store after all
            raise
        self._balances = dict(planned.head.balances)
        self.head = LedgerHead(planned.head.seq, planned.head.hash)
        self.book = state
        self._since_snapshot = since

    def _reload(self) -> bool:
        """After a failed write: if the store moved on (the write was committed after all),
        rebuild from it and say so (True): what was decided from the old book is void."""
        moved = self.store.last() != (self.head.seq, self.head.hash)
        if moved:
            self._load()
        self._stale = False
        return moved

    def close(self) -> None:
        """Close the store, releasing the lease first (another controller may take over at
        once instead of after it lapses)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.lease is not None:
                try:
                    self.store.release(self.lease)
                except LedgerError as exc:
                    log.warning("link ledger lease not released", path=self.where, error=str(exc))
        finally:
            self.store.close()

    def __enter__(self) -> LinkLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
