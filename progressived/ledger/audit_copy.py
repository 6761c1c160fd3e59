"""A ledger in PostgreSQL, read by the audit commands through the very checks SQLite gets.

``ledger verify``, ``ledger export``, ``meters``, ``hits`` and ``link reconcile`` take a
``postgresql://`` URL where they take a path. They read the database in ONE read-only
``REPEATABLE READ`` transaction (a consistent moment, never blocking the writer), stream
every table with ``COPY`` into a private temporary SQLite file with the same tables and
columns, and run their unchanged checks and reports on that copy: one implementation of
every check, so a PostgreSQL ledger is verified exactly as a SQLite one is. The copy has
no CHECK constraints or triggers, so a row that PostgreSQL's constraints would not hold
(possible only past a dropped constraint) is still copied and reported by the checks, not
refused by the copy. It is removed when the command ends. ``PRAGMA integrity_check`` has no
meaning for the copy; PostgreSQL's own is ``pg_amcheck`` (docs/ledger.md).
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from progressived.ledger import schema
from progressived.ledger.errors import LedgerError, LedgerMismatch, LedgerMissing
from progressived.storage.errors import one_line
from progressived.storage.location import Location, is_url, shown

if TYPE_CHECKING:
    import psycopg

# Each copied table: its columns in order (the SQLite ledger's), its key for the copy.
COLUMNS = {
    "meta": ("key TEXT PRIMARY KEY", "value"),
    "journal": (
        "seq INTEGER PRIMARY KEY",
        "at",
        "table_id",
        "round",
        "seat",
        "kind",
        "category",
        "actor",
        "idem_key",
        "data",
        "prev_hash",
        "hash",
    ),
    "postings": ("seq", "leg", "account", "units", "PRIMARY KEY (seq, leg)"),
    "balances": ("account TEXT PRIMARY KEY", "units", "seq"),
    "idempotency": ("key TEXT PRIMARY KEY", "first_seq", "last_seq"),
    "snapshots": ("seq INTEGER PRIMARY KEY", "hash", "state"),
}
EMPTY = (  # tables a link ledger in a database does not have; SQLite's schema names them
    "CREATE TABLE outbox (id INTEGER PRIMARY KEY, seq, topic, payload, qos, retain)",
    "CREATE TABLE link_outbox (seq INTEGER PRIMARY KEY, id, type, topic, payload)",
    "CREATE INDEX journal_kind ON journal (kind, seq)",
)
BATCH = 5000


def _names(table: str) -> list[str]:
    return [c.split()[0] for c in COLUMNS[table] if not c.startswith("PRIMARY KEY")]


@contextlib.contextmanager
def readable(location: Location) -> Iterator[Path]:
    """The ledger file to read: the path itself, or a private copy of a database's ledger
    (removed afterwards). :class:`LedgerError` when the database cannot be read."""
    if not is_url(location):
        yield Path(location)
        return
    with tempfile.TemporaryDirectory(prefix="progressived-audit-") as folder:
        path = Path(folder) / "ledger.db"
        copy_database(str(location), path)
        yield path


def copy_database(url: str, path: Path) -> None:
    """Copy the ledger at ``url`` into a new SQLite file at ``path``."""
    import psycopg  # noqa: PLC0415 - only for a ledger in a database (an extra)

    where = shown(url)
    out = sqlite3.connect(path, isolation_level=None)
    try:
        out.execute("PRAGMA journal_mode = OFF")
        out.execute("PRAGMA synchronous = OFF")
        out.execute("BEGIN")
        for table, columns in COLUMNS.items():
            out.execute(f"CREATE TABLE {table} ({', '.join(columns)})")
        for statement in EMPTY:
            out.execute(statement)
        with psycopg.connect(url, application_name="progressived audit") as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            tables = {
                str(t)
                for (t,) in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                )
            }
            if not tables:
                raise LedgerMissing(f"{where}: no ledger in that database (never initialised)")
            if not set(COLUMNS) <= tables:
                raise LedgerMismatch(f"{where}: not a progressived ledger")
            for table in COLUMNS:
                names = ", ".join(_names(table))
                marks = ", ".join("?" * len(_names(table)))
                insert = f"INSERT INTO {table} ({names}) VALUES ({marks})"
                types = _types(conn, table)  # before COPY: the connection is busy then
                with conn.cursor().copy(f"COPY (SELECT {names} FROM {table}) TO STDOUT") as copy:
                    copy.set_types(types)
                    batch: list[tuple[object, ...]] = []
                    for row in copy.rows():
                        batch.append(row)
                        if len(batch) >= BATCH:
                            out.executemany(insert, batch)
                            batch.clear()
                    out.executemany(insert, batch)
            conn.rollback()
        out.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        out.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION}")
        out.execute("COMMIT")
    except psycopg.Error as exc:
        raise LedgerError(f"{where}: cannot read the ledger: {one_line(exc)}") from None
    finally:
        out.close()


def _types(conn: psycopg.Connection[Any], table: str) -> list[str]:
    """The PostgreSQL types of a copied table's columns, in order (COPY sends text)."""
    rows = conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = %s",
        (table,),
    ).fetchall()
    found = {str(name): str(kind) for name, kind in rows}
    return [found[name] for name in _names(table)]
