"""The I/O half of a ledger write: one SQLite transaction that inserts a :class:`Plan`.

Every write is one ``BEGIN IMMEDIATE`` transaction (a writer never has to upgrade a read
lock, so ``busy_timeout`` always applies) on a connection in WAL mode with
``synchronous=FULL``: when :func:`commit` returned, the rows are on disk. A failed
transaction is rolled back and reported as the exception the daemon acts on
(:func:`translate`).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from progressived.ledger.errors import LedgerError, LedgerMismatch, LedgerUnavailable
from progressived.ledger.plan import Plan
from progressived.ledger.rows import AppendResult

JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
BUSY_TIMEOUT_MS = 5000

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


def known_keys(
    conn: sqlite3.Connection, keys: Iterable[str | None], path: Path | str
) -> dict[str, AppendResult]:
    """The first results of those idempotency keys that are already journaled."""
    wanted = list({key for key in keys if key is not None})
    known: dict[str, AppendResult] = {}
    try:
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            for key, first, last in conn.execute(
                f"SELECT key, first_seq, last_seq FROM idempotency WHERE key IN ({marks})", chunk
            ):
                known[str(key)] = AppendResult(int(first), int(last))
    except sqlite3.Error as exc:
        raise translate(exc, path) from None
    return known


Statement = tuple[str, tuple[object, ...]]
"""An extra SQL statement run in a write's transaction (the link outbox's rows)."""


def commit(
    conn: sqlite3.Connection, plan: Plan, path: Path | str, extra: Sequence[Statement] = ()
) -> None:
    """Insert ``plan``'s rows and move the recorded head, in one durable transaction."""
    with transaction(conn, path):
        for sql, args in extra:
            conn.execute(sql, args)
        if plan.journal:
            conn.executemany(_INSERT_JOURNAL, plan.journal)
        if plan.postings:
            conn.executemany(_INSERT_POSTINGS, plan.postings)
        if plan.balances:
            conn.executemany(_UPSERT_BALANCES, plan.balances)
        if plan.keys:
            conn.executemany(_INSERT_KEYS, plan.keys)
        if plan.outbox:
            conn.executemany(_INSERT_OUTBOX, plan.outbox)
        if plan.snapshot is not None:
            conn.execute(_INSERT_SNAPSHOT, plan.snapshot)
        if plan.journal:
            head = plan.head
            conn.executemany(_MOVE_HEAD, ((str(head.seq), "head_seq"), (head.hash, "head_hash")))


def lock(path: Path) -> int:
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
