"""The link controller's ledger: the book's events, durable, in the table ledger's format.

One SQLite file per link, written by one process (the ``PATH.lock`` flock), with the table
ledger's schema, hash chain, WAL and ``synchronous=FULL`` (the code is
:mod:`progressived.ledger`'s: opening, planning, committing). ``meta`` says
``ledger_kind = link``. The rows are :mod:`progressived.link.core.journal`'s. Every
:data:`~progressived.link.core.snapshot.EVERY` rows a commit also writes a snapshot of the book
(:mod:`progressived.link.core.snapshot`) in the same transaction. Opening loads the latest
snapshot that names its row's hash and replays the ``link_applied`` rows after it through
the pure book, checking each stored result and postings, so a restarted link answers a
repeat exactly as before; with no usable snapshot it replays every row (and logs why).
:meth:`LinkLedger.commit` journals a batch of book steps in one transaction (group commit);
a ``link_applied`` row's idempotency key is ``TABLE:SEQ``, so SQLite itself refuses a
table's sequence applied twice.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from progressived.engine.events import Posting
from progressived.ledger import chain, opening, plan, schema
from progressived.ledger.commit import BUSY_TIMEOUT_MS, commit, lock, transaction, translate
from progressived.ledger.errors import (
    LedgerError,
    LedgerMismatch,
    LedgerMissing,
    LedgerUnavailable,
)
from progressived.ledger.readonly import connect_untouched
from progressived.ledger.rows import Record, nonzero
from progressived.link.core import book, journal, snapshot
from progressived.link.core import params as lp
from progressived.link.core.messages import Head
from progressived.link.core.state import Applied, BookState, Step
from progressived.runtime.clock import utc_now

NEVER = 2**62  # the plan's own (table) snapshots are off: this module writes the link's
TRIES = 3  # snapshots tried at open, newest first, before replaying every row
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


log = structlog.get_logger("progressived.link.ledger")


@dataclass(frozen=True, slots=True)
class Recovery:
    """How the book was rebuilt at open: from which snapshot (0: none, every row replayed),
    how many rows after it were read, and how long it took."""

    snapshot_seq: int
    replayed: int
    seconds: float
    why_full: str = ""  # why no snapshot was used, when one exists


class LinkLedger:
    """The link's ledger. :meth:`create` once, then :meth:`open`; one process writes."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        lock_fd: int,
        params: lp.LinkParams,
        snapshot_every: int = snapshot.EVERY,
    ) -> None:
        self.path = path
        self.params = params
        self.snapshot_every = snapshot_every
        self.recovery = Recovery(0, 0, 0.0)
        self._since_snapshot = 0
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
        snapshot_every: int = snapshot.EVERY,
    ) -> None:
        """A new link ledger: ``link_created`` and a ``meter_opened`` per meter.

        Refuses an existing file (:class:`LedgerExists`) and a missing directory
        (:class:`LedgerMissing`); a half-made file is removed.
        """
        lp.validate(params)
        path = Path(path)
        who = dict(created_by or {})
        ledger = cls._connect(path, params, at, software, "new", snapshot_every)
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
            ledger._write(rows, book.open_book(params), journal.params_to_dict(params))
        except BaseException:
            ledger.close()
            for leftover in ("", "-wal", "-shm", "-journal"):
                with suppress(FileNotFoundError):
                    path.with_name(path.name + leftover).unlink()
            raise
        ledger.close()

    @classmethod
    def open(
        cls,
        path: Path,
        params: lp.LinkParams,
        *,
        at: str | None = None,
        software: str = "",
        snapshot_every: int = snapshot.EVERY,
    ) -> LinkLedger:
        """Open: the latest snapshot plus the rows after it, replayed and checked (every row
        without a usable snapshot); journal changed parameters (``at``: now).
        :attr:`recovery` says how.

        :class:`LedgerMissing` for a missing or empty file, :class:`LedgerMismatch` for a
        table ledger, another link's or a foreign file, or a row that does not replay.
        """
        lp.validate(params)
        at = at or utc_now()
        ledger = cls._connect(Path(path), params, at, software, "existing", snapshot_every)
        try:
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
        ledger = cls(path, conn, -1, params)
        try:
            schema.check_supported(version)
            if version == 0:
                raise LedgerMissing(f"link ledger {path} is empty: it was never initialised")
            try:
                meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            except sqlite3.Error as exc:
                raise translate(exc, path) from None
            _check_meta(path, {str(k): str(v) for k, v in meta.items()}, params.link_id)
            ledger._load()
        except BaseException:
            ledger.close()
            raise
        return ledger

    @classmethod
    def _connect(
        cls,
        path: Path,
        params: lp.LinkParams,
        at: str,
        software: str,
        presence: str,
        snapshot_every: int,
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
        if snapshot_every < 1:
            os.close(fd)
            conn.close()
            raise LedgerError(f"snapshot_every must be at least 1, not {snapshot_every}")
        ledger = cls(path, conn, fd, params, snapshot_every)
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
        """Rebuild the book: the latest usable snapshot and the rows after it, else every
        row (the chain checked on the way, from the snapshot's row)."""
        started = time.perf_counter()
        found, why = self._snapshot()
        if found is not None:
            try:
                self._replay(found, started)
                return
            except _ChainBroken:
                raise  # the rows are at fault, whatever the snapshot holds
            except LedgerMismatch as exc:  # the snapshot, or a row after it: see below
                why = f"replaying from the snapshot at row {found[0]} failed: {exc}"
                log.error(
                    "link ledger snapshot refused: replaying every row",
                    path=str(self.path),
                    snapshot_seq=found[0],
                    why=why,
                )
        self._replay(None, started, why)

    def _snapshot(self) -> tuple[tuple[int, str, journal.Replay] | None, str]:
        """The newest of the last :data:`TRIES` snapshots that names its row's hash and
        reads back, as (seq, hash, the replay at that row); else ``None`` and why."""
        conn, path = self._conn, self.path
        why = "the ledger has no snapshot"
        try:
            listed = conn.execute(
                "SELECT s.seq, s.hash, j.hash FROM snapshots s LEFT JOIN journal j "
                "ON j.seq = s.seq ORDER BY s.seq DESC LIMIT ?",
                (TRIES,),
            ).fetchall()
            for seq, snap_hash, row_hash in listed:
                if snap_hash != row_hash:
                    why = f"the snapshot at row {seq} does not name that row's hash"
                else:
                    (text,) = conn.execute(
                        "SELECT state FROM snapshots WHERE seq = ?", (seq,)
                    ).fetchone()
                    try:
                        recorded, state = snapshot.loads(str(text))
                        replay = journal.Replay()
                        replay.params = journal.params_from_dict(recorded)
                        replay.recorded = journal.params_to_dict(replay.params)
                        replay.state = state
                        return (int(seq), str(snap_hash), replay), ""
                    except (KeyError, TypeError, ValueError) as exc:  # SnapshotError too
                        why = f"the snapshot at row {seq} cannot be read: {exc}"
                log.warning(
                    "link ledger snapshot unusable", path=str(path), snapshot_seq=seq, why=why
                )
        except sqlite3.Error as exc:
            raise translate(exc, path) from None
        return None, why

    def _replay(
        self, found: tuple[int, str, journal.Replay] | None, started: float, why: str = ""
    ) -> None:
        conn, path = self._conn, self.path
        since, since_hash, replay = found if found is not None else (0, chain.GENESIS, None)
        replay = replay or journal.Replay()
        try:
            walk = chain.Walk(since, since_hash)
            for seq, _check, message in walk.breaks(conn.execute(chain.ROWS_SQL, (since, NEVER))):
                raise _ChainBroken(
                    f"ledger {path}: row {seq}: {message} (run `progressivectl ledger verify`)"
                )
            if walk.seq == 0:
                raise LedgerMissing(f"link ledger {path} has no rows: it was never initialised")
            replayed = 0
            for seq, kind, data in conn.execute(
                "SELECT seq, kind, data FROM journal WHERE seq > ? ORDER BY seq", (since,)
            ):
                replayed += 1
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
        self._since_snapshot = walk.seq - since
        self.recovery = Recovery(since, replayed, time.perf_counter() - started, why)
        if found is None and walk.seq > self.snapshot_every:
            log.warning(
                "link ledger opened by replaying every row",
                path=str(path),
                rows=replayed,
                seconds=round(self.recovery.seconds, 3),
                why=why,
            )

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
        recorded = journal.params_to_dict(self.params)
        self._write(rows, state, recorded)
        self._recorded = recorded

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

    def _write(
        self, rows: list[Record], state: BookState, recorded: Mapping[str, Any] | None = None
    ) -> None:
        """Commit ``rows`` leading to ``state`` (``recorded``: the link parameters as last
        recorded once they are written, when these rows change them), with a snapshot of
        ``state`` when :attr:`snapshot_every` rows have passed since the last one."""
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
        since = self._since_snapshot + len(planned.journal)
        if since >= self.snapshot_every:
            try:
                text = snapshot.dumps(self._recorded if recorded is None else recorded, state)
            except snapshot.SnapshotError as exc:
                raise LedgerError(f"ledger {self.path}: refused: {exc}") from None
            planned = dataclasses.replace(
                planned, snapshot=(planned.head.seq, planned.head.hash, text)
            )
            since = 0
        try:
            commit(self._conn, planned, self.path)
        except LedgerUnavailable:
            self._stale = True  # the commit may have reached the disk after all
            raise
        self._balances = dict(planned.head.balances)
        self.head = Head(planned.head.seq, planned.head.hash)
        self.book = state
        self._since_snapshot = since

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
            if self._lock_fd >= 0:  # -1: read without the lock (replay_readonly)
                os.close(self._lock_fd)

    def __enter__(self) -> LinkLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _ChainBroken(LedgerMismatch):
    """The hash chain breaks after the snapshot: no full replay would open the ledger."""


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
