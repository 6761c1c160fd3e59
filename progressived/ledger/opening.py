"""Opening a ledger file: whether it may be opened, preparing its connection, its first row.

Apart from :mod:`progressived.ledger.store` (the writer) so that what opening checks and
sets -- a foreign ledger, WAL and ``synchronous=FULL``, schema migrations, the append-only
triggers an older file lacks, the ``ledger_created`` row's content -- reads in one place.
Whether the file may be opened at all (missing, already there) and its lock are the storage
adapter's (:class:`progressived.storage.sqlite.SqliteStore`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path

from progressived.core.params import TableParams
from progressived.ledger import chain, parameters, schema
from progressived.ledger.errors import LedgerError, LedgerMissing, LedgerUnavailable
from progressived.ledger.rows import Record
from progressived.storage.sqlite import JOURNAL_SIZE_LIMIT, SqliteStore, translate


def check_text(label: str, ledger_id: str, at: str) -> None:
    """The ledger's id and the time it is opened at must hash unambiguously (no ``|``, CR
    or LF: :func:`progressived.ledger.chain.clean`), else :class:`LedgerError`."""
    try:
        chain.clean(label, ledger_id)
        chain.clean("at", at)
    except ValueError as exc:
        raise LedgerError(str(exc)) from None


def open_file(
    path: Path, ledger_id: str, at: str, software: str, presence: str
) -> tuple[SqliteStore, dict[str, str]]:
    """Lock, connect and :func:`prepare` a ledger file (a table's or a link's); the store and
    its ``meta``. ``presence``: ``any``, ``existing`` or ``new``
    (:meth:`~progressived.storage.sqlite.SqliteStore.open`); a new file that could not be
    made whole is removed, so the retry of ``init`` is not blocked by it."""
    store = SqliteStore.open(path, presence)
    try:
        meta = prepare(store.conn, path, ledger_id, at, software, presence, store.transaction)
    except BaseException:
        if presence == "new":
            store.remove()
        else:
            store.close()
        raise
    return store, meta


def prepare(
    conn: sqlite3.Connection,
    path: Path,
    table_id: str,
    at: str,
    software: str,
    presence: str,
    transaction: Callable[[], AbstractContextManager[None]],
) -> dict[str, str]:
    """Check the schema, set WAL and ``synchronous=FULL``, migrate, add missing triggers;
    returns the ``meta`` table. ``transaction`` is the writer's ``BEGIN IMMEDIATE`` block."""
    try:
        version = schema.file_version(conn)
        schema.check_supported(version)
        if version == 0 and presence == "existing":
            raise LedgerMissing(
                f"ledger {path} is empty: it was never initialised (for a new "
                "table: remove the empty file, then `progressived init --config FILE`)"
            )
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise LedgerUnavailable(f"ledger {path}: cannot use WAL mode ({mode})")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
        conn.execute("PRAGMA foreign_keys = ON")
        if version < schema.SCHEMA_VERSION:
            with transaction():
                schema.migrate(conn, version)
                conn.executemany(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                    [
                        ("table_id", table_id),
                        ("created_at", at),
                        ("software", software),
                        ("head_seq", "0"),
                        ("head_hash", chain.GENESIS),
                    ],
                )
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if missing := schema.missing_triggers(conn):  # a ledger made before they existed
            with transaction():
                for statement in missing:
                    conn.execute(statement)
    except sqlite3.Error as exc:
        raise translate(exc, path) from None
    return {str(k): str(v) for k, v in meta.items()}


def created_row(
    params: TableParams, at: str, software: str, created_by: Mapping[str, str]
) -> Record:
    """The ``ledger_created`` row: the table, the schema, the software, the parameters as
    created (docs/ledger.md) and who made it (``progressived init``: operator, OS user)."""
    return Record(
        kind="ledger_created",
        detail={
            "table_id": params.table_id,
            "schema_version": schema.SCHEMA_VERSION,
            "software": software,
            "paytable": params.paytable.id,
            "meters": list(params.meter_ids),
            "parameters": parameters.describe(params),
            **created_by,
        },
        at=at,
        actor=created_by.get("operator") or created_by.get("os_user", ""),
    )
