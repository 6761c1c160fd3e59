"""A read-only connection to a ledger, for the operator commands and ``ledger verify``.

``mode=ro`` in WAL mode: it never blocks the writer, and it refuses a missing file or an
empty one (a missing ledger is never an empty one).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from progressived.ledger import schema
from progressived.ledger.commit import BUSY_TIMEOUT_MS
from progressived.ledger.errors import LedgerError, LedgerMissing
from progressived.storage.sqlite import translate


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


def ledger_kind(path: Path | str) -> str:
    """``table`` or ``link`` (``meta.ledger_kind``; a table ledger has none)."""
    conn = connect_readonly(path)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'ledger_kind'").fetchone()
    except sqlite3.Error as exc:
        raise LedgerError(f"{path}: cannot read the ledger: {exc}") from None
    finally:
        conn.close()
    return "table" if row is None else str(row[0])


def connect_untouched(path: Path | str) -> sqlite3.Connection:
    """A read-only connection that creates no file beside the ledger (``check-config``,
    ``link --check``), whoever runs it.

    An ordinary read-only connection to a WAL ledger creates the ``-wal`` and ``-shm``
    files when they are missing, and made by root (``check-config`` after an upgrade) the
    daemon's user could not open them afterwards. So: with both files there (a daemon runs,
    or stopped without removing them), ``mode=ro`` reads through them; otherwise the main
    file is the whole ledger (its last connection checkpointed it) and ``immutable=1``
    reads it without any file beside it. SQLite errors are raised as they are.
    """
    p = Path(path)
    beside = [p.with_name(p.name + suffix) for suffix in ("-wal", "-shm")]
    mode = "mode=ro" if all(f.exists() for f in beside) else "mode=ro&immutable=1"
    uri = f"file:{quote(p.resolve().as_posix())}?{mode}"
    return sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)


def read_meta(path: Path) -> dict[str, str]:
    """A ledger file's ``meta`` table, read without writing anything beside it.

    :class:`LedgerMissing` for an empty file, :class:`LedgerMismatch` for a file that is
    not a progressived ledger (not SQLite at all, another program's database) or of a newer
    schema, :class:`LedgerUnavailable` when it cannot be read now, :class:`LedgerError`
    for a damaged file.
    """
    try:
        conn = connect_untouched(path)
        try:
            version = schema.file_version(conn)
            schema.check_supported(version)
            if version == 0:
                raise LedgerMissing(
                    f"{path}: an empty file: the ledger was never initialised (for a new "
                    "table: remove the empty file, then `progressived init`)"
                )
            rows = conn.execute("SELECT key, value FROM meta").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise translate(exc, path) from None
    return {str(k): str(v) for k, v in rows}
