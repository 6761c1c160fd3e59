"""The link controller's ledger: the book's events, durable, in the table ledger's format.

One SQLite file per link, written by one process (the ``PATH.lock`` flock), with the table
ledger's schema, hash chain, WAL and ``synchronous=FULL`` (the code is
:mod:`progressived.ledger`'s: opening, planning, committing). ``meta`` says
``ledger_kind = link``. The rows are :mod:`progressived.link.journal`'s. Opening replays every
``link_applied`` row through the pure book and checks each stored result and postings, so a
restarted link answers a repeat exactly as before. :meth:`LinkLedger.commit` journals a batch
of book steps in one transaction (group commit); a ``link_applied`` row's idempotency key is
``TABLE:SEQ``, so SQLite itself refuses a table's sequence applied twice.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from progressived.clock import utc_now
from progressived.engine.events import Posting
from progressived.ledger import chain, opening, plan
from progressived.ledger.commit import BUSY_TIMEOUT_MS, commit, lock, transaction, translate
from progressived.ledger.errors import (
    LedgerError,
    LedgerMismatch,
    LedgerMissing,
    LedgerUnavailable,
)
from progressived.ledger.rows import Record, nonzero
from progressived.link import book, journal
from progressived.link import params as lp
from progressived.link.messages import Head
from progressived.link.state import Applied, BookState, Step

NEVER = 2**62  # the link ledger keeps no snapshots: opening replays every row
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def at_of(at_ms: int) -> str:
    """A row's ``at``: the link's receive time, UTC ISO-8601 to the millisecond."""
    moment = _EPOCH + timedelta(milliseconds=at_ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _record(
    kind: str,
    data: Mapping[str, Any],
    at: str,
    actor: str,
    category: str,
    key: str | None = None,
    postings: tuple[Posting, ...] = (),
) -> Record:
    return Record(kind, data, at, actor, None, 0, category, key, None, postings)


def records(steps: Sequence[tuple[Step, int]]) -> list[Record]:
    """The rows of a batch of book steps, in order (only events write rows)."""
    out: list[Record] = []
    last_ms, at = -1, ""
    for step, at_ms in steps:
        if at_ms != last_ms:  # a batch shares a few receive times: format each once
            last_ms, at = at_ms, at_of(at_ms)
        for event in step.events:
            if isinstance(event, Applied):
                key = f"{event.table}:{event.seq}"
                text = journal.applied_text(event, at_ms)  # = dumps(journal.applied(...))
                out.append(
                    Record(
                        event.kind,
                        {},
                        at,
                        event.table,
                        None,
                        0,
                        "engine",
                        key,
                        None,
                        event.postings,
                        text,
                    )
                )
            else:
                out.append(
                    _record(event.kind, journal.refused(event), at, event.table or "", "system")
                )
    return out


class LinkLedger:
    """The link's ledger. :meth:`create` once, then :meth:`open`; one process writes."""

    def __init__(
        self, path: Path, conn: sqlite3.Connection, lock_fd: int, params: lp.LinkParams
    ) -> None:
        self.path = path
        self.params = params
        self._conn = conn
        self._lock_fd = lock_fd
        self._closed = False
        self._stale = False
        self._balances: dict[str, int] = {}
        self._hash = chain.GENESIS
        self.book = BookState()
        self.head = Head(0, chain.GENESIS)
        self._recorded: dict[str, Any] = {}

    # ------------------------------------------------------------------ creating, opening

    @classmethod
    def create(
        cls,
        path: Path,
        params: lp.LinkParams,
        *,
        at: str,
        software: str,
        created_by: Mapping[str, str] | None = None,
    ) -> None:
        """A new link ledger: ``link_created`` and a ``meter_opened`` per meter.

        Refuses an existing file (:class:`LedgerExists`) and a missing directory
        (:class:`LedgerMissing`); a half-made file is removed.
        """
        lp.validate(params)
        path = Path(path)
        who = dict(created_by or {})
        ledger = cls._connect(path, params, at, software, "new")
        try:
            with transaction(ledger._conn, path):
                ledger._conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) "
                    "DO UPDATE SET value = excluded.value",
                    [("ledger_kind", journal.LEDGER_KIND), ("link_id", params.link_id)],
                )
            detail = {**journal.params_to_dict(params), "software": software, **who}
            actor = who.get("operator") or who.get("os_user") or "system"
            rows = [_record("link_created", detail, at, actor, "system")]
            for spec in params.meters:
                data, postings = journal.meter_opened(spec)
                rows.append(_record("meter_opened", data, at, "system", "engine", None, postings))
            ledger._write(rows, book.open_book(params))
        except BaseException:
            ledger.close()
            for leftover in ("", "-wal", "-shm", "-journal"):
                with suppress(FileNotFoundError):
                    path.with_name(path.name + leftover).unlink()
            raise
        ledger.close()

    @classmethod
    def open(
        cls, path: Path, params: lp.LinkParams, *, at: str | None = None, software: str = ""
    ) -> LinkLedger:
        """Open, replay and check every row; journal changed parameters (``at``: now).

        :class:`LedgerMissing` for a missing or empty file, :class:`LedgerMismatch` for a
        table ledger, another link's or a foreign file, or a row that does not replay.
        """
        lp.validate(params)
        at = at or utc_now()
        ledger = cls._connect(Path(path), params, at, software, "existing")
        try:
            ledger._load()
            ledger._record_changes(at)
        except BaseException:
            ledger.close()
            raise
        return ledger

    @classmethod
    def _connect(
        cls, path: Path, params: lp.LinkParams, at: str, software: str, presence: str
    ) -> LinkLedger:
        try:
            chain.clean("link id", params.link_id)
            chain.clean("at", at)
        except ValueError as exc:
            raise LedgerError(str(exc)) from None
        opening.check_presence(path, presence)
        fd = lock(path)
        try:
            opening.check_presence(path, presence)  # again, under the lock
            conn = sqlite3.connect(
                path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
            )
        except sqlite3.Error as exc:
            os.close(fd)
            raise translate(exc, path) from None
        except BaseException:
            os.close(fd)
            raise
        ledger = cls(path, conn, fd, params)
        try:
            meta = opening.prepare(
                conn, path, params.link_id, at, software, presence, lambda: transaction(conn, path)
            )
            if presence == "existing":
                _check_meta(path, meta, params.link_id)
        except BaseException:
            ledger.close()
            raise
        return ledger

    def _load(self) -> None:
        """Rebuild the book from every row (the chain checked on the way)."""
        conn, path = self._conn, self.path
        replay = journal.Replay()
        try:
            walk = chain.Walk()
            for seq, _check, message in walk.breaks(conn.execute(chain.ROWS_SQL, (0, NEVER))):
                raise LedgerMismatch(
                    f"ledger {path}: row {seq}: {message} (run `progressivectl ledger verify`)"
                )
            if walk.seq == 0:
                raise LedgerMissing(f"link ledger {path} has no rows: it was never initialised")
            for seq, kind, data in conn.execute("SELECT seq, kind, data FROM journal ORDER BY seq"):
                wrong = replay.row(str(kind), json.loads(data))
                if wrong is not None:
                    raise LedgerMismatch(
                        f"ledger {path}: row {seq} ({kind}): {wrong} "
                        "(run `progressivectl ledger verify`)"
                    )
            table = {str(a): int(u) for a, u in conn.execute("SELECT account, units FROM balances")}
        except sqlite3.Error as exc:
            raise translate(exc, path) from None
        if nonzero(table) != nonzero(replay.state.balances):
            raise LedgerMismatch(
                f"ledger {path}: the balances table differs from the replayed "
                "book (run `progressivectl ledger verify`)"
            )
        self._balances = table
        self.book = replay.state
        self.head = Head(walk.seq, walk.hash)
        self._recorded = replay.recorded or {}

    def _record_changes(self, at: str) -> None:
        detail = journal.changed_detail(self._recorded, self.params)
        if detail is None:
            return
        rows = [_record("parameter_changed", detail, at, "system", "parameter")]
        state = self.book
        have = {m["id"] for m in self._recorded.get("meters", [])}
        for spec in self.params.meters:
            if spec.id not in have and spec.id not in state.epochs:
                data, postings = journal.meter_opened(spec)
                rows.append(_record("meter_opened", data, at, "system", "engine", None, postings))
                state = journal.with_meters(state, postings, spec.id)
        self._write(rows, state)
        self._recorded = journal.params_to_dict(self.params)

    # ------------------------------------------------------------------ writing

    def commit(self, steps: Sequence[tuple[Step, int]]) -> None:
        """Journal a batch of book steps ``(step, at_ms)`` in ONE transaction.

        Each step must follow the one before (the first follows :attr:`book`). Afterwards
        :attr:`book` is the last step's state and :attr:`head` the new last row. On any
        error nothing moved (:class:`LedgerUnavailable`: retry the batch later).
        """
        if not steps:
            return
        self._write(records(steps), steps[-1][0].state)

    def _write(self, rows: list[Record], state: BookState) -> None:
        if self._closed:
            raise LedgerError(f"ledger {self.path} is closed")
        if self._stale:
            self._reload()
        if not rows:
            self.book = state
            return
        head = plan.Head(self.head.seq, self.head.hash, self._balances)
        try:
            planned = plan.plan(rows, head, {}, table_id=self.params.link_id, snapshot_every=NEVER)
        except plan.Refused as exc:
            raise LedgerError(f"ledger {self.path}: refused: {exc}") from None
        if any(r.duplicate for r in planned.results):
            raise LedgerError(f"ledger {self.path}: a table sequence twice in one batch")
        if nonzero(planned.head.balances) != nonzero(state.balances):
            raise LedgerError(
                f"ledger {self.path}: refused: the book's balances differ from the postings"
            )
        try:
            commit(self._conn, planned, self.path)
        except LedgerUnavailable:
            self._stale = True  # the commit may have reached the disk after all
            raise
        self._balances = dict(planned.head.balances)
        self.head = Head(planned.head.seq, planned.head.hash)
        self.book = state

    def _reload(self) -> None:
        """After a failed write: if the file moved on, rebuild from it."""
        try:
            row = self._conn.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from None
        if int(row[0]) != self.head.seq:
            self._load()
        self._stale = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._conn.close()
        finally:
            os.close(self._lock_fd)

    def __enter__(self) -> LinkLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_meta(path: Path, meta: Mapping[str, str], link_id: str) -> None:
    kind = meta.get("ledger_kind", "table")
    if kind != journal.LEDGER_KIND:
        raise LedgerMismatch(
            f"{path} is a {kind} ledger (table {meta.get('table_id')!r}), "
            f"not link {link_id!r}'s ledger: refusing to open it"
        )
    if meta.get("link_id") != link_id:
        raise LedgerMismatch(
            f"ledger {path} belongs to link {meta.get('link_id')!r}, "
            f"not {link_id!r}: refusing to open it"
        )
