"""The SQLite adapter of the storage port: a ledger file on this machine.

The open file with its lock: one process writes (an exclusive ``flock`` on ``PATH.lock``,
released by the kernel if the process dies), on a connection the ledger prepares (WAL,
``synchronous=FULL``: :mod:`progressived.ledger.opening`). Every write is one
``BEGIN IMMEDIATE`` transaction (a writer never has to upgrade a read lock, so
``busy_timeout`` always applies): when :meth:`SqliteStore.write` returned, the rows are on
disk. A failed transaction is rolled back and reported as the exception the daemon acts on
(:func:`translate`).

The lease (:mod:`progressived.storage.port`) is kept in ``meta`` (``lease.holder``,
``lease.token``, ``lease.expires``) with the same rules as on PostgreSQL; the clock is this
machine's, the database's own. On one machine the ``flock`` already keeps a second writer
out, so the link controller on SQLite takes no lease (docs/link.md); the rows are there for
the same API on both adapters.

Micro-benchmark: ``python -m bench.ledger_commit`` (:meth:`SqliteStore.write` against bare
inserts of the same rows, alternately; docs/performance.md, "Micro-benchmarks").
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from progressived.storage.errors import (
    Fenced,
    LeaseHeld,
    LedgerError,
    LedgerExists,
    LedgerMismatch,
    LedgerMissing,
    LedgerUnavailable,
)
from progressived.storage.port import LEASE, ChainRow, Lease, Statement, Writable
from progressived.storage.sqlite_version import require_sqlite

JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
BUSY_TIMEOUT_MS = 5000
GENESIS = "0" * 64
# A new ledger file and its lock: the daemon's user writes, its group reads, others nothing
# (the audit record of a table's money is not the world's, whatever the umask; SQLite gives
# the -wal and -shm files the database file's mode).
FILE_MODE = 0o640

# SQLite primary result codes that mean "cannot write now", not "bad data".
_UNAVAILABLE_CODES = frozenset({3, 5, 6, 8, 10, 13, 14, 15, 22})  # PERM BUSY LOCKED READONLY
# IOERR FULL CANTOPEN PROTOCOL NOLFS
SQLITE_NOTADB = 26  # "file is not a database": random bytes, another program's file

_INSERT_JOURNAL = (
    "INSERT INTO journal (seq, at, table_id, round, seat, kind, category, actor, idem_key, "
    "data, hash, prev_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_POSTINGS = "INSERT INTO postings (seq, leg, account, units) VALUES (?, ?, ?, ?)"
_UPSERT_BALANCES = (
    "INSERT INTO balances (account, units, seq) VALUES (?, ?, ?) ON CONFLICT (account) "
    "DO UPDATE SET units = excluded.units, seq = excluded.seq"
)
_INSERT_KEYS = "INSERT INTO idempotency (key, first_seq, last_seq) VALUES (?, ?, ?)"
_INSERT_OUTBOX = "INSERT INTO outbox (seq, topic, payload, qos, retain) VALUES (?, ?, ?, ?, ?)"
_INSERT_SNAPSHOT = "INSERT INTO snapshots (seq, hash, state) VALUES (?, ?, ?)"
_MOVE_HEAD = "UPDATE meta SET value = ? WHERE key = ?"
_SET_META = (
    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) "
    "DO UPDATE SET value = excluded.value"
)
# The chain checker's rows (progressived.ledger.chain): SQLite builds each row's text with
# the chain's rules (``coalesce`` writes NULL as empty, integers are decimal).
CHAIN_ROWS_SQL = """
SELECT seq, prev_hash, hash,
  prev_hash || '|' || seq || '|' || at || '|' || table_id || '|' || coalesce(round, '') || '|' ||
  seat || '|' || kind || '|' || category || '|' || actor || '|' || coalesce(idem_key, '') ||
  '|' || data
FROM journal WHERE seq > ? AND seq <= ? ORDER BY seq"""
_LEASE_KEYS = (f"{LEASE}.holder", f"{LEASE}.token", f"{LEASE}.expires")


def translate(exc: sqlite3.Error, path: Path | str) -> LedgerError:
    """Map a SQLite error to the exception the daemon acts on."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == SQLITE_NOTADB:
        return LedgerMismatch(f"{path} is not a progressived ledger: {exc}")
    if isinstance(exc, sqlite3.OperationalError) and (
        code is None or (code & 0xFF) in _UNAVAILABLE_CODES
    ):
        return LedgerUnavailable(f"ledger {path} cannot be written: {exc}")
    return LedgerError(f"ledger {path}: {exc}")


@contextmanager
def transaction(conn: sqlite3.Connection, path: Path | str) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` .. ``COMMIT``; rolled back (and translated) on any error."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            raise translate(exc, path) from None
        raise


def check_presence(path: Path, presence: str) -> None:
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


def file_identity(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file at ``path``, or None if nothing is there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def rescue_path(path: Path, at: str) -> Path:
    """Where the rows of a ledger whose file is gone are saved: beside it, named by the UTC
    time (``at``, ISO 8601) it was noticed: ``ledger.db.rescued-20261128T234512Z``."""
    stamp = "".join(c for c in at if c.isalnum())[:15]
    return path.with_name(f"{path.name}.rescued-{stamp}Z")


def lock(path: Path) -> int:
    """Take the one-writer lock ``PATH.lock`` (released by the kernel if the process dies)."""
    lock_path = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, FILE_MODE)
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


def create(path: Path) -> None:
    """Make a missing ledger file with :data:`FILE_MODE` before SQLite opens it.

    SQLite would make it 0644 less the umask (0644 by hand, under ``runuser`` or ``sudo``),
    and its ``-wal`` and ``-shm`` files after it with the same mode. Called with the lock
    held, so no other writer makes the file in between; an existing file is left as it is.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    except OSError as exc:
        raise LedgerUnavailable(f"ledger {path}: cannot create it: {exc.strerror}") from None
    os.close(fd)


class SqliteStore:
    """An open ledger file: the connection, the lock, transactions, the rows in and out."""

    kind = "sqlite"

    def __init__(self, path: Path, conn: sqlite3.Connection, lock_fd: int | None) -> None:
        """``lock_fd``: the held lock (:func:`lock`), or None for a reader that takes none
        and writes nothing (``progressived link --check`` beside a running controller)."""
        self.path = path
        self.conn = conn
        self._lock_fd = lock_fd
        self.closed = False
        self._identity = file_identity(path)  # the file this connection opened

    @classmethod
    def open(cls, path: Path, presence: str = "any") -> SqliteStore:
        """Lock and connect. ``presence``: ``any`` (create the file if missing),
        ``existing`` (:class:`LedgerMissing` if it is not there) or ``new``
        (:class:`LedgerExists` if it is); checked again once the lock is held, so no
        other process can make the file in between."""
        require_sqlite()  # before any file is touched: SQLite too old for the STRICT tables
        path = Path(path)
        if presence != "any":
            check_presence(path, presence)
        fd = lock(path)
        try:
            if presence != "any":
                check_presence(path, presence)
            create(path)
            conn = sqlite3.connect(
                path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
            )
        except sqlite3.Error as exc:
            os.close(fd)
            raise translate(exc, path) from None
        except BaseException:
            os.close(fd)
            raise
        return cls(path, conn, fd)

    @property
    def where(self) -> str:
        return str(self.path)

    def remove(self) -> None:
        """Close and delete a half-made ledger (an ``init`` that failed must not block its
        retry)."""
        self.close()
        for leftover in ("", "-wal", "-shm", "-journal"):
            with suppress(FileNotFoundError):
                self.path.with_name(self.path.name + leftover).unlink()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.conn.close()
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)

    def file_problem(self) -> str | None:
        """Why the path no longer names the file this store has open (``None`` while it
        does): deleted, moved away or replaced (another inode) under the running process.

        Writes then go on into a file nobody will see again once this process ends (an
        unlinked inode), or beside the one a restart would open; the caller stops taking
        wagers and says so (docs/operations.md, "Troubleshooting").
        """
        if self._identity is None:
            return None
        now = file_identity(self.path)
        if now is None:
            return f"ledger file {self.path} was deleted (or moved) under the running process"
        if now != self._identity:
            return f"ledger file {self.path} was replaced (another file) under the running process"
        return None

    def save_copy(self, target: Path) -> None:
        """SQLite's online backup of this connection (every committed row, the WAL's too)
        to ``target``, atomically (a ``.part`` file renamed), ``0640``. A file deleted under
        the process is read through its open connection: the one complete copy there is."""
        self.check_open()
        part = target.with_name(target.name + ".part")
        try:
            part.unlink(missing_ok=True)
            copy = sqlite3.connect(part)
            try:
                self.conn.backup(copy)
            finally:
                copy.close()
            part.chmod(FILE_MODE)
            part.replace(target)
        except sqlite3.Error as exc:
            raise translate(exc, target) from None
        except OSError as exc:
            raise LedgerUnavailable(f"cannot write {target}: {exc.strerror}") from None

    def check_open(self) -> None:
        if self.closed:
            raise LedgerError(f"ledger {self.path} is closed")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The writer's ``BEGIN IMMEDIATE`` block."""
        self.check_open()
        with transaction(self.conn, self.path):
            yield

    # ------------------------------------------------------------------ reading

    def _query(self, sql: str, args: Sequence[object] = ()) -> list[tuple[object, ...]]:
        self.check_open()
        try:
            return list(self.conn.execute(sql, tuple(args)).fetchall())
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from None

    def meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._query("SELECT key, value FROM meta")}

    def last(self) -> tuple[int, str]:
        rows = self._query("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1")
        return (0, GENESIS) if not rows else (int(str(rows[0][0])), str(rows[0][1]))

    def balances(self) -> dict[str, int]:
        return {str(a): int(str(u)) for a, u in self._query("SELECT account, units FROM balances")}

    def snapshots(self, limit: int) -> list[tuple[int, str, str | None]]:
        rows = self._query(
            "SELECT s.seq, s.hash, j.hash FROM snapshots s LEFT JOIN journal j "
            "ON j.seq = s.seq ORDER BY s.seq DESC LIMIT ?",
            (limit,),
        )
        return [(int(str(s)), str(h), None if j is None else str(j)) for s, h, j in rows]

    def snapshot_text(self, seq: int) -> str:
        rows = self._query("SELECT state FROM snapshots WHERE seq = ?", (seq,))
        if not rows:
            raise LedgerError(f"ledger {self.path}: no snapshot at row {seq}")
        return str(rows[0][0])

    def chain_rows(self, after: int, upto: int) -> Iterator[ChainRow]:
        yield from self._stream(CHAIN_ROWS_SQL, (after, upto))  # type: ignore[misc]

    def rows(self, after: int) -> Iterator[tuple[int, str, str]]:
        yield from self._stream(  # type: ignore[misc]
            "SELECT seq, kind, data FROM journal WHERE seq > ? ORDER BY seq", (after,)
        )

    def _stream(self, sql: str, args: tuple[object, ...]) -> Iterator[tuple[object, ...]]:
        self.check_open()
        try:
            yield from self.conn.execute(sql, args)
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from None

    def known_keys(self, keys: Iterable[str | None]) -> dict[str, tuple[int, int]]:
        """``first_seq, last_seq`` of those idempotency keys that are already journaled."""
        wanted = list({key for key in keys if key is not None})
        known: dict[str, tuple[int, int]] = {}
        try:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                for key, first, last in self.conn.execute(
                    f"SELECT key, first_seq, last_seq FROM idempotency WHERE key IN ({marks})",
                    chunk,
                ):
                    known[str(key)] = (int(first), int(last))
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from None
        return known

    # ------------------------------------------------------------------ writing

    def write(
        self,
        rows: Writable,
        *,
        meta: Mapping[str, str] | None = None,
        fence: Lease | None = None,
        extra: Sequence[Statement] = (),
    ) -> None:
        """Insert ``rows`` and move the recorded head, in one durable transaction;
        ``extra`` statements (a table's link outbox rows) commit or roll back with them."""
        with self.transaction():
            conn = self.conn
            for sql, args in extra:
                conn.execute(sql, args)
            if rows.journal:
                conn.executemany(_INSERT_JOURNAL, rows.journal)
            if rows.postings:
                conn.executemany(_INSERT_POSTINGS, rows.postings)
            if rows.balances:
                conn.executemany(_UPSERT_BALANCES, rows.balances)
            if rows.keys:
                conn.executemany(_INSERT_KEYS, rows.keys)
            if rows.outbox:
                conn.executemany(_INSERT_OUTBOX, rows.outbox)
            if rows.snapshot is not None:
                conn.execute(_INSERT_SNAPSHOT, rows.snapshot)
            if rows.journal:
                head = rows.head
                conn.executemany(
                    _MOVE_HEAD, ((str(head.seq), "head_seq"), (head.hash, "head_hash"))
                )
            if meta:
                conn.executemany(_SET_META, meta.items())
            if fence is not None:
                self._check_fence(fence)

    # ------------------------------------------------------------------ the lease

    def _lease_row(self) -> Lease | None:
        found = dict(
            self.conn.execute(
                "SELECT key, value FROM meta WHERE key IN (?, ?, ?)", _LEASE_KEYS
            ).fetchall()
        )
        if len(found) < len(_LEASE_KEYS):
            return None
        holder, token, expires = (str(found[k]) for k in _LEASE_KEYS)
        return Lease(holder, int(token), float(expires), 0.0)

    def _set_lease(self, holder: str, token: int, expires: float) -> None:
        self.conn.executemany(
            _SET_META, zip(_LEASE_KEYS, (holder, str(token), repr(expires)), strict=True)
        )

    def _check_fence(self, fence: Lease) -> None:
        """Inside the write transaction (``BEGIN IMMEDIATE`` holds SQLite's write lock, so
        no acquire can come between this check and COMMIT): the lease must be current;
        then it is extended by its term."""
        now = time.time()
        row = self._lease_row()
        if row is None or (row.holder, row.token) != (fence.holder, fence.token):
            raise Fenced(
                f"ledger {self.path}: the lease of {fence.holder!r} (token {fence.token}) was "
                "taken over: nothing was written"
            )
        if row.expires_at <= now:
            raise Fenced(
                f"ledger {self.path}: the lease of {fence.holder!r} (token {fence.token}) "
                "lapsed: nothing was written"
            )
        self._set_lease(fence.holder, fence.token, now + fence.ttl_s)

    def lease(self) -> Lease | None:
        self.check_open()
        try:
            return self._lease_row()
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from None

    def acquire(self, holder: str, ttl_s: float) -> Lease:
        with self.transaction():
            now = time.time()
            row = self._lease_row()
            if row is not None and row.holder != holder and row.expires_at > now:
                raise LeaseHeld(
                    f"ledger {self.path} is leased to {row.holder!r} (token {row.token}) "
                    f"for {row.expires_at - now:.1f} s more",
                    holder=row.holder,
                    token=row.token,
                    expires_in_s=row.expires_at - now,
                )
            token = 1 if row is None else row.token + 1
            self._set_lease(holder, token, now + ttl_s)
        return Lease(holder, token, now + ttl_s, ttl_s)

    def renew(self, lease: Lease) -> Lease:
        with self.transaction():
            self._check_fence(lease)
        return Lease(lease.holder, lease.token, time.time() + lease.ttl_s, lease.ttl_s)

    def renew_aside(self, lease: Lease) -> Lease:
        return self.renew(lease)  # one file, one process: its connection is never busy

    def release(self, lease: Lease) -> None:
        with self.transaction():
            row = self._lease_row()
            if row is not None and (row.holder, row.token) == (lease.holder, lease.token):
                self._set_lease(row.holder, row.token, min(row.expires_at, time.time()))
