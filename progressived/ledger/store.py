"""The ledger: an append-only, double-entry, hash-chained journal in SQLite (WAL).

One process writes (an exclusive ``flock`` on ``PATH.lock`` makes sure of it); every write
is one ``BEGIN IMMEDIATE`` transaction, so a writer never has to upgrade a read lock and
``busy_timeout`` always applies. With ``synchronous=FULL`` a call that returned has been
fsynced: that is what lets the daemon acknowledge an event only after ``append`` returns.

The hot path builds all rows of a call (or of a group of calls, :meth:`Ledger.append_many`)
in Python, then writes them with a handful of ``executemany`` statements. Balances are
kept in the same transaction as the postings, and the in-memory copies (state, balances,
head of the chain) only move after COMMIT succeeded, so a failed write leaves the object
exactly as it was and the call can be retried.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from progressived.engine.core import evolve, initial_state, open_meters
from progressived.engine.events import Event, Posting, event_from_dict
from progressived.engine.state import TableState
from progressived.ledger import chain, schema, snapshot
from progressived.ledger.errors import (
    LedgerError,
    LedgerExists,
    LedgerMismatch,
    LedgerMissing,
    LedgerUnavailable,
)
from progressived.params import TableParams

ROUND_END = frozenset({"round_reconciled", "round_voided"})
SNAPSHOT_EVERY = 1000  # rows: recovery replays at most about this many
SNAPSHOT_AT_ROUND_END = 200  # rows: a snapshot at a round end once this many have passed
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
BUSY_TIMEOUT_MS = 5000
CATEGORIES = ("engine", "system", "operator", "parameter")

# SQLite primary result codes that mean "cannot write now", not "bad data".
_UNAVAILABLE_CODES = frozenset({3, 5, 6, 8, 10, 13, 14, 15, 22})  # PERM BUSY LOCKED READONLY
# IOERR FULL CANTOPEN PROTOCOL NOLFS


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """A message to publish once the rows it describes are durable (transactional outbox)."""

    topic: str
    payload: str
    qos: int = 1
    retain: bool = False


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """An outbox message not yet acknowledged, with its id and the journal row it follows."""

    id: int
    seq: int
    topic: str
    payload: str
    qos: int
    retain: bool


@dataclass(frozen=True, slots=True)
class JournalRow:
    """One journal row as written: ``data`` is the event dict or the system event's detail."""

    seq: int
    at: str
    kind: str
    round: int | None
    seat: int
    data: dict[str, Any]
    category: str = "engine"
    actor: str = ""
    idem_key: str | None = None
    hash: str = ""


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The journal rows a call wrote (``last_seq < first_seq`` when it wrote none)."""

    first_seq: int
    last_seq: int
    duplicate: bool = False


OutboxFn = Callable[[Sequence[JournalRow]], Sequence[OutboxMessage]]


@dataclass(frozen=True, slots=True)
class Batch:
    """One :meth:`Ledger.append` call, for :meth:`Ledger.append_many` (group commit)."""

    events: Sequence[Event]
    state: TableState
    at: str
    actor: str = ""
    idempotency_key: str | None = None
    outbox: OutboxFn | None = None


@dataclass(frozen=True, slots=True)
class _Record:
    """A system / operator / parameter row (no postings, no state change)."""

    kind: str
    detail: Mapping[str, Any]
    at: str
    actor: str
    round: int | None
    seat: int
    category: str
    idempotency_key: str | None
    outbox: OutboxFn | None


@dataclass(frozen=True, slots=True)
class Recovery:
    """How the state was rebuilt at open: from which snapshot, replaying how many rows."""

    snapshot_seq: int
    replayed: int
    seconds: float


def dumps(data: Mapping[str, Any]) -> str:
    """The stored JSON text: sorted keys, no spaces, ASCII only, no NaN (hash-stable)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def nonzero(balances: Mapping[str, int]) -> dict[str, int]:
    return {account: units for account, units in balances.items() if units}


def translate(exc: sqlite3.Error, path: Path | str) -> LedgerError:
    """Map a SQLite error to the exception the daemon acts on."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.OperationalError) and (
        code is None or (code & 0xFF) in _UNAVAILABLE_CODES
    ):
        return LedgerUnavailable(f"ledger {path} cannot be written: {exc}")
    return LedgerError(f"ledger {path}: {exc}")


def connect_readonly(path: Path | str) -> sqlite3.Connection:
    """A read-only connection for the operator commands: never blocks the writer (WAL)."""
    p = Path(path)
    if not p.exists():
        raise LedgerError(f"{path}: no such ledger")
    uri = f"file:{p.resolve().as_posix()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        version = schema.file_version(conn)
        schema.check_supported(version)
    except sqlite3.Error as exc:
        raise LedgerError(f"{path}: cannot read the ledger: {exc}") from None
    if version == 0:
        conn.close()
        raise LedgerError(f"{path}: an empty file: the ledger was never initialised")
    return conn


class Ledger:
    """The table's ledger. Use :meth:`open`; one instance (and one process) writes."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        lock_fd: int,
        params: TableParams,
        snapshot_every: int,
    ) -> None:
        self._path = path
        self._conn = conn
        self._lock_fd = lock_fd
        self._params = params
        self._table_id = params.table_id
        self._snapshot_every = snapshot_every
        self._state = TableState()
        self._balances: dict[str, int] = {}
        self._head_seq = 0
        self._head_hash = chain.GENESIS
        self._since_snapshot = 0
        self._closed = False
        self._stale = False  # a write failed: re-read the head before the next one
        self._mutex = threading.RLock()  # the daemon may write from executor threads
        self.recovery = Recovery(0, 0, 0.0)

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
        a newer schema or a file that is not a ledger, :class:`LedgerUnavailable` when it
        cannot be written.
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
        try:
            chain.clean("table id", params.table_id)
            chain.clean("at", at)
        except ValueError as exc:
            raise LedgerError(str(exc)) from None
        if presence != "any":
            _check_presence(path, presence)
        lock_fd = _lock(path)
        try:
            if presence != "any":
                _check_presence(path, presence)  # again, now no other process can init it
            conn = sqlite3.connect(
                path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
            )
        except sqlite3.Error as exc:
            os.close(lock_fd)
            raise translate(exc, path) from None
        except BaseException:
            os.close(lock_fd)
            raise
        ledger = cls(path, conn, lock_fd, params, snapshot_every)
        try:
            ledger._setup(at, software, presence, created_by)
        except BaseException:
            ledger.close()
            if presence == "new":  # a half-made ledger must not block the retry of init
                for leftover in ("", "-wal", "-shm", "-journal"):
                    with suppress(FileNotFoundError):
                        path.with_name(path.name + leftover).unlink()
            raise
        return ledger

    def _setup(
        self, at: str, software: str, presence: str, created_by: Mapping[str, str]
    ) -> None:
        conn = self._conn
        try:
            version = schema.file_version(conn)
            schema.check_supported(version)
            if version == 0 and presence == "existing":
                raise LedgerMissing(
                    f"ledger {self._path} is empty: it was never initialised (for a new "
                    "table: remove the empty file, then `progressived init --config FILE`)"
                )
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise LedgerUnavailable(f"ledger {self._path}: cannot use WAL mode ({mode})")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
            conn.execute("PRAGMA foreign_keys = ON")
            if version < schema.SCHEMA_VERSION:
                with self._transaction():
                    schema.migrate(conn, version)
                    conn.executemany(
                        "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                        [
                            ("table_id", self._table_id),
                            ("created_at", at),
                            ("software", software),
                            ("head_seq", "0"),
                            ("head_hash", chain.GENESIS),
                        ],
                    )
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.Error as exc:
            raise translate(exc, self._path) from None
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
                    _Record(
                        "ledger_created",
                        {
                            "table_id": self._table_id,
                            "schema_version": schema.SCHEMA_VERSION,
                            "software": software,
                            "paytable": self._params.paytable.id,
                            "meters": list(self._params.meter_ids),
                            **created_by,
                        },
                        at,
                        created_by.get("operator") or created_by.get("os_user", ""),
                        None,
                        0,
                        "system",
                        None,
                        None,
                    ),
                    Batch(start.events, start.state, at),
                ]
            )
        else:
            self._open_new_meters(at)

    def _open_new_meters(self, at: str) -> None:
        """Fund meters configured since the ledger was created (a recorded parameter change)."""
        opened = open_meters(self._params, self._state, at)
        events, state = opened.events, opened.state
        if events:
            self.append(events, state, at=at, actor="system")

    def _recover(self) -> None:
        """Rebuild the engine state: the latest snapshot plus the engine rows after it."""
        started = time.perf_counter()
        conn = self._conn
        try:
            head = conn.execute(
                "SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1"
            ).fetchone()
            if head is None:
                return
            self._head_seq, self._head_hash = int(head[0]), str(head[1])
            self._balances = {
                str(a): int(u) for a, u in conn.execute("SELECT account, units FROM balances")
            }
            snap = conn.execute(
                "SELECT s.seq, s.hash, s.state, j.hash FROM snapshots s "
                "LEFT JOIN journal j ON j.seq = s.seq ORDER BY s.seq DESC LIMIT 1"
            ).fetchone()
            state = TableState()
            since = 0
            if snap is not None:
                if snap[1] != snap[3]:
                    raise LedgerError(
                        f"ledger {self._path}: snapshot at row {snap[0]} does not match the "
                        "journal (run `progressivectl ledger verify`)"
                    )
                state = snapshot.loads(snap[2])
                since = int(snap[0])
            replayed = 0
            prev = chain.GENESIS if snap is None else str(snap[1])
            expected = since + 1
            for row in conn.execute(
                "SELECT seq, at, table_id, round, seat, kind, category, actor, idem_key, data, "
                "prev_hash, hash FROM journal WHERE seq > ? ORDER BY seq",
                (since,),
            ):
                # The rows replayed are checked against the chain (cheap: at most about
                # snapshot_every rows); `ledger verify` checks all of them.
                text = chain.content(*row[:10])
                if row[0] != expected or row[10] != prev or chain.link(prev, text) != row[11]:
                    raise LedgerError(
                        f"ledger {self._path}: the hash chain breaks at row {row[0]} "
                        "(run `progressivectl ledger verify`)"
                    )
                prev, expected = str(row[11]), int(row[0]) + 1
                if row[6] == "engine":
                    state = evolve(state, event_from_dict(json.loads(row[9])))
                    replayed += 1
        except sqlite3.Error as exc:
            raise translate(exc, self._path) from None
        if nonzero(state.balances) != nonzero(self._balances):
            raise LedgerError(
                f"ledger {self._path}: balances table differs from the replayed postings "
                "(run `progressivectl ledger verify`)"
            )
        self._state = state
        self._since_snapshot = self._head_seq - since
        self.recovery = Recovery(since, replayed, time.perf_counter() - started)

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

    # ------------------------------------------------------------------ writing

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
        rec = _Record(kind, detail, at, actor, round, seat, category, idempotency_key, outbox)
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
                with self._transaction():
                    self._conn.executemany(
                        "DELETE FROM outbox WHERE id = ?", [(int(i),) for i in ids]
                    )
            finally:
                with suppress(sqlite3.Error):
                    self._conn.execute("PRAGMA synchronous = FULL")

    def checkpoint(self) -> None:
        """Fold the WAL back into the database and truncate it (call when idle)."""
        self._check_open()
        try:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error as exc:
            raise translate(exc, self._path) from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._conn.close()
        finally:
            os.close(self._lock_fd)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise LedgerError(f"ledger {self._path} is closed")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._check_open()
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise translate(exc, self._path) from None
            raise

    def _known_keys(self, items: Sequence[Batch | _Record]) -> dict[str, AppendResult]:
        """The first results of the idempotency keys in ``items`` already journaled."""
        keys = list({i.idempotency_key for i in items if i.idempotency_key is not None})
        known: dict[str, AppendResult] = {}
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                for key, first, last in self._conn.execute(
                    f"SELECT key, first_seq, last_seq FROM idempotency WHERE key IN ({marks})",
                    chunk,
                ):
                    known[str(key)] = AppendResult(int(first), int(last))
        except sqlite3.Error as exc:
            raise translate(exc, self._path) from None
        return known

    def _write(self, items: Sequence[Batch | _Record]) -> list[AppendResult]:
        with self._mutex:
            if self._stale:
                # The last write failed (disk full, I/O error). If the failure came after
                # SQLite had made the commit durable, the file is ahead of memory: start
                # again from what the file holds. Callers re-read ``state`` after an error.
                self._recover()
                self._stale = False
            try:
                return self._write_locked(items)
            except LedgerUnavailable:
                self._stale = True
                raise

    def _write_locked(self, items: Sequence[Batch | _Record]) -> list[AppendResult]:
        self._check_open()
        table_id = self._table_id
        seq = self._head_seq
        prev = self._head_hash
        balances = dict(self._balances)
        state = self._state
        since = self._since_snapshot
        round_end = False
        results: list[AppendResult] = []
        journal: list[tuple[Any, ...]] = []
        legs: list[tuple[int, int, str, int]] = []
        touched: dict[str, int] = {}
        keys: list[tuple[str, int, int]] = []
        outbox: list[tuple[int, str, str, int, int]] = []
        group_keys = self._known_keys(items)
        for item in items:
            key = item.idempotency_key
            if key is not None:
                first = group_keys.get(key)
                if first is not None:
                    results.append(replace(first, duplicate=True))
                    continue
            rows: list[JournalRow] = []
            count = 0
            specs: list[tuple[str, int | None, int, str, str, dict[str, Any], tuple[Posting, ...]]]
            try:
                actor = chain.clean("actor", item.actor)
                at = chain.clean("at", item.at)
                if key is not None:
                    chain.clean("idempotency key", key)
                    if not key:
                        raise ValueError("an idempotency key may not be empty")
                if isinstance(item, _Record):
                    chain.clean("kind", item.kind)
                    specs = [
                        (at, item.round, item.seat, item.kind, item.category, dict(item.detail), ())
                    ]
                else:
                    specs = []
                    for event in item.events:
                        data = _event_dict(event)
                        specs.append(
                            (
                                chain.clean("at", event.at) or at,
                                event.round,
                                event.seat,
                                event.kind,
                                "engine",
                                data,
                                event.postings,
                            )
                        )
                        if sum(p.units for p in event.postings):
                            raise ValueError(f"{event.kind} postings do not balance")
                        if event.kind in ROUND_END:
                            round_end = True
                for row_at, rnd, seat, kind, category, data, postings in specs:
                    seq += 1
                    text = dumps(data)
                    idem = key if not count else None
                    prev = chain.link(
                        prev,
                        chain.content(
                            seq, row_at, table_id, rnd, seat, kind, category, actor, idem, text
                        ),
                    )
                    journal.append(
                        (seq, row_at, table_id, rnd, seat, kind, category, actor, idem, text, prev)
                    )
                    for leg, posting in enumerate(postings):
                        if type(posting.units) is not int:
                            raise ValueError(f"{kind}: amounts must be integers")
                        legs.append((seq, leg, posting.account, posting.units))
                        balances[posting.account] = balances.get(posting.account, 0) + posting.units
                        touched[posting.account] = seq
                    count += 1
                    if item.outbox is not None:  # only the outbox callback needs them
                        rows.append(
                            JournalRow(
                                seq, row_at, kind, rnd, seat, data, category, actor, idem, prev
                            )
                        )
            except (ValueError, TypeError) as exc:
                raise LedgerError(f"ledger {self._path}: refused: {exc}") from None
            if isinstance(item, Batch):
                if nonzero(balances) != nonzero(item.state.balances):
                    raise LedgerError(
                        f"ledger {self._path}: refused: the engine's balances differ from the "
                        "ledger's after these events"
                    )
                state = item.state
            result = AppendResult(seq - count + 1, seq)
            results.append(result)
            since += count
            if key is not None:
                group_keys[key] = result
                keys.append((key, result.first_seq, result.last_seq))
            if item.outbox is not None and rows:
                for msg in item.outbox(rows):
                    outbox.append((rows[-1].seq, msg.topic, msg.payload, msg.qos, int(msg.retain)))
        if not journal and not keys:
            return results
        snap = None
        if journal and (
            since >= self._snapshot_every or (round_end and since >= SNAPSHOT_AT_ROUND_END)
        ):
            snap = (seq, prev, snapshot.dumps(state))
        conn = self._conn
        with self._transaction():
            conn.executemany(
                "INSERT INTO journal (seq, at, table_id, round, seat, kind, category, actor, "
                "idem_key, data, hash, prev_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                _with_prev(journal, self._head_hash),
            )
            if legs:
                conn.executemany(
                    "INSERT INTO postings (seq, leg, account, units) VALUES (?, ?, ?, ?)", legs
                )
            if touched:
                conn.executemany(
                    "INSERT INTO balances (account, units, seq) VALUES (?, ?, ?) "
                    "ON CONFLICT (account) DO UPDATE "
                    "SET units = excluded.units, seq = excluded.seq",
                    [(a, balances[a], s) for a, s in touched.items()],
                )
            if keys:
                conn.executemany(
                    "INSERT INTO idempotency (key, first_seq, last_seq) VALUES (?, ?, ?)", keys
                )
            if outbox:
                conn.executemany(
                    "INSERT INTO outbox (seq, topic, payload, qos, retain) VALUES (?, ?, ?, ?, ?)",
                    outbox,
                )
            if snap is not None:
                conn.execute("INSERT INTO snapshots (seq, hash, state) VALUES (?, ?, ?)", snap)
            if journal:
                conn.executemany(
                    "UPDATE meta SET value = ? WHERE key = ?",
                    ((str(seq), "head_seq"), (prev, "head_hash")),
                )
        self._head_seq, self._head_hash = seq, prev
        self._balances = balances
        self._state = state
        self._since_snapshot = 0 if snap is not None else since
        return results


_FIELDS: dict[type[Event], tuple[str, ...]] = {}


def _event_dict(event: Event) -> dict[str, Any]:
    """``event_to_dict(event)``, with the dataclass field list cached per event type.

    The hot path calls this once per row; ``dataclasses.fields`` is the slow part of the
    engine's function. The output is the same (tests/test_ledger_perf.py checks it).
    """
    names = _FIELDS.get(type(event))
    if names is None:
        names = _FIELDS[type(event)] = tuple(f.name for f in dataclasses.fields(event))
    out: dict[str, Any] = {"kind": event.kind}
    for name in names:
        value = getattr(event, name)
        if name == "postings":
            out[name] = [[p.account, p.units] for p in value]
        elif isinstance(value, tuple):
            if name == "settlement":
                out[name] = [dataclasses.asdict(p) for p in value]
            else:
                out[name] = list(value)
        else:
            out[name] = value
    return out


def _with_prev(rows: list[tuple[Any, ...]], first_prev: str) -> list[tuple[Any, ...]]:
    """Add each row's ``prev_hash`` (the hash of the row before it)."""
    out = []
    prev = first_prev
    for row in rows:
        out.append((*row, prev))
        prev = row[-1]
    return out


def _check_presence(path: Path, presence: str) -> None:
    """``existing``: the directory and the file must be there; ``new``: the file must not."""
    if presence == "new" and (path.exists() or path.is_symlink()):
        raise LedgerExists(
            f"{path} already exists: progressived init creates a new ledger and never "
            "overwrites one"
        )
    if not path.parent.is_dir():
        raise LedgerMissing(f"ledger directory {path.parent} does not exist")
    if presence == "existing" and not path.exists():
        raise LedgerMissing(
            f"no ledger at {path}: a missing ledger is not an empty one; create a new table's "
            "ledger with `progressived init --config FILE`, or fix [ledger] path"
        )


def _lock(path: Path) -> int:
    """Take the one-writer lock ``PATH.lock`` (released by the kernel if the process dies)."""
    lock_path = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise LedgerUnavailable(
            f"ledger {path}: cannot create {lock_path}: {exc.strerror}"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise LedgerUnavailable(
            f"ledger {path} is open for writing by another process (lock {lock_path})"
        ) from None
    return fd
