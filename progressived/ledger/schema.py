"""The ledger's schema, its version and its migrations.

Tables are STRICT with CHECK constraints so that a wrong type or a float amount cannot be
stored even by a buggy writer. ``journal`` and ``postings`` are append-only: triggers
refuse UPDATE and DELETE (the hash chain detects changes made after dropping them).

Schema changes are migrations: ``MIGRATIONS[n]`` takes a version-``n`` file to ``n + 1``
inside the caller's ``BEGIN IMMEDIATE`` transaction. The version is kept both in
``PRAGMA user_version`` and in ``meta`` (the latter is what an auditor sees).
``sqlite-utils`` is used to inspect an existing file (tables present, triggers) before
deciding whether it is a ledger at all.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from progressived.ledger.errors import LedgerMismatch

SCHEMA_VERSION = 2
APPLICATION_ID = 0x50524F47  # "PROG": marks the file as a progressived ledger

# Text fields hashed by the chain may not hold '|' or line breaks (see chain.py).
_NO_SEP = "instr({col}, '|') = 0 AND instr({col}, char(10)) = 0 AND instr({col}, char(13)) = 0"


def _plain(col: str) -> str:
    return _NO_SEP.format(col=col)


V1 = f"""
CREATE TABLE meta (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE journal (
    seq INTEGER PRIMARY KEY CHECK (seq >= 1),
    at TEXT NOT NULL CHECK (length(at) > 0 AND {_plain("at")}),
    table_id TEXT NOT NULL CHECK (length(table_id) > 0 AND {_plain("table_id")}),
    round INTEGER CHECK (round IS NULL OR round >= 0),
    seat INTEGER NOT NULL CHECK (seat >= 0),
    kind TEXT NOT NULL CHECK (length(kind) > 0 AND {_plain("kind")}),
    category TEXT NOT NULL CHECK (category IN ('engine', 'system', 'operator', 'parameter')),
    actor TEXT NOT NULL CHECK ({_plain("actor")}),
    idem_key TEXT CHECK (idem_key IS NULL OR (length(idem_key) > 0 AND {_plain("idem_key")})),
    data TEXT NOT NULL CHECK (json_valid(data)),
    prev_hash TEXT NOT NULL CHECK (length(prev_hash) = 64),
    hash TEXT NOT NULL CHECK (length(hash) = 64)
) STRICT;
CREATE INDEX journal_kind ON journal (kind, seq);

CREATE TABLE postings (
    seq INTEGER NOT NULL REFERENCES journal (seq),
    leg INTEGER NOT NULL CHECK (leg >= 0),
    account TEXT NOT NULL CHECK (length(account) > 0),
    units INTEGER NOT NULL,
    PRIMARY KEY (seq, leg)
) STRICT, WITHOUT ROWID;

CREATE TABLE balances (
    account TEXT PRIMARY KEY NOT NULL,
    units INTEGER NOT NULL,
    seq INTEGER NOT NULL CHECK (seq >= 1)
) STRICT, WITHOUT ROWID;

CREATE TABLE idempotency (
    key TEXT PRIMARY KEY NOT NULL CHECK (length(key) > 0),
    first_seq INTEGER NOT NULL CHECK (first_seq >= 1),
    last_seq INTEGER NOT NULL CHECK (last_seq >= first_seq - 1)
) STRICT, WITHOUT ROWID;

CREATE TABLE snapshots (
    seq INTEGER PRIMARY KEY CHECK (seq >= 1),
    hash TEXT NOT NULL CHECK (length(hash) = 64),
    state TEXT NOT NULL CHECK (json_valid(state))
) STRICT;

CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    seq INTEGER NOT NULL,
    topic TEXT NOT NULL CHECK (length(topic) > 0),
    payload TEXT NOT NULL,
    qos INTEGER NOT NULL CHECK (qos IN (0, 1, 2)),
    retain INTEGER NOT NULL CHECK (retain IN (0, 1))
) STRICT;

CREATE TRIGGER journal_no_update BEFORE UPDATE ON journal
BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
CREATE TRIGGER journal_no_delete BEFORE DELETE ON journal
BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
CREATE TRIGGER postings_no_update BEFORE UPDATE ON postings
BEGIN SELECT RAISE(ABORT, 'postings are append-only'); END;
CREATE TRIGGER postings_no_delete BEFORE DELETE ON postings
BEGIN SELECT RAISE(ABORT, 'postings are append-only'); END;
CREATE TRIGGER snapshots_no_update BEFORE UPDATE ON snapshots
BEGIN SELECT RAISE(ABORT, 'snapshots are append-only'); END;
"""

# Added after version 1 shipped: created IF NOT EXISTS at every open (Ledger._setup), so
# ledgers made before it get it too. Deleting the latest snapshot would otherwise quietly
# make recovery start from an older one.
SNAPSHOTS_NO_DELETE = (
    "CREATE TRIGGER IF NOT EXISTS snapshots_no_delete BEFORE DELETE ON snapshots\n"
    "BEGIN SELECT RAISE(ABORT, 'snapshots are append-only'); END"
)
LATE_TRIGGERS = {"snapshots_no_delete": SNAPSHOTS_NO_DELETE}

LEDGER_TABLES = frozenset(
    {"meta", "journal", "postings", "balances", "idempotency", "snapshots", "outbox"}
)


def _create_v1(conn: sqlite3.Connection) -> None:
    for statement in V1.split(";\n"):
        if statement.strip():
            conn.execute(statement)
    for statement in LATE_TRIGGERS.values():
        conn.execute(statement)


def missing_triggers(conn: sqlite3.Connection) -> list[str]:
    """The CREATE statements of the triggers added since version 1 that ``conn`` lacks."""
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
    have = {str(name) for (name,) in rows}
    return [sql for name, sql in LATE_TRIGGERS.items() if name not in have]


# Version 2: the link outbox (docs/link.md). A table's messages to its link controller wait here
# until the link's final result is journaled -- deleted in that transaction, never on the
# broker's PUBACK (docs/link.md). ``seq`` is the table's gapless link sequence.
V2_LINK_OUTBOX = """
CREATE TABLE link_outbox (
    seq INTEGER PRIMARY KEY CHECK (seq >= 1),
    id TEXT NOT NULL UNIQUE CHECK (length(id) > 0),
    type TEXT NOT NULL CHECK (length(type) > 0),
    topic TEXT NOT NULL CHECK (length(topic) > 0),
    payload TEXT NOT NULL
) STRICT
"""


def _add_link_outbox(conn: sqlite3.Connection) -> None:
    conn.execute(V2_LINK_OUTBOX)


# MIGRATIONS[n] upgrades a version-n file to n + 1 (0 = empty file).
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    0: _create_v1,
    1: _add_link_outbox,
}


def file_version(conn: sqlite3.Connection) -> int:
    """The schema version of an open file: 0 for an empty file.

    Raises :class:`LedgerMismatch` for a SQLite file that is not a ledger.
    """
    app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if app_id == APPLICATION_ID and version == SCHEMA_VERSION:
        # The usual start: a current ledger. A plain query keeps sqlite-utils (and its
        # imports) off the start-up path; it inspects new, old and foreign files below.
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        tables = {str(name) for (name,) in rows}
    else:
        import sqlite_utils  # noqa: PLC0415 - only for files that are not current ledgers

        tables = set(sqlite_utils.Database(conn, execute_plugins=False).table_names())
    if not tables and app_id == 0 and version == 0:
        return 0
    if app_id != APPLICATION_ID or not tables >= LEDGER_TABLES:
        raise LedgerMismatch(
            "not a progressived ledger (application_id "
            f"{app_id:#x}, tables {', '.join(sorted(tables)) or 'none'})"
        )
    return version


def check_supported(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise LedgerMismatch(
            f"the ledger has schema version {version}, newer than this software's "
            f"{SCHEMA_VERSION}: upgrade progressived before opening it"
        )


def migrate(conn: sqlite3.Connection, version: int) -> int:
    """Apply every migration from ``version`` on; the caller holds the write transaction."""
    check_supported(version)
    while version < SCHEMA_VERSION:
        MIGRATIONS[version](conn)
        version += 1
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(SCHEMA_VERSION),),
    )
    return version
