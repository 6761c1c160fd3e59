"""The archive's tables in PostgreSQL (docs/archive.md, "The database").

One database per site (beside the link's on the same Patroni cluster, never inside it: the
link's database holds the link ledger alone). ``archive_rows`` holds every table's journal
rows exactly as their ledgers hold them (``data`` is ``text``: the hash covers its bytes),
keyed ``(table_id, seq)``, append-only; ``archive_heads`` the head per table, moved in the
transaction that stores its rows; ``archive_alarms`` every refused chain; ``lease`` the
writer's lease, the link ledger's rows and rules (:mod:`progressived.storage.port`).
"""

from __future__ import annotations

SCHEMA_VERSION = 1
APPLICATION_ID = "0x50524f47"  # "PROG", as every progressived database
KIND = "archive"
TABLES = ("meta", "archive_heads", "archive_rows", "archive_alarms", "lease")


def _plain(col: str) -> str:
    return f"strpos({col}, '|') = 0 AND strpos({col}, chr(10)) = 0 AND strpos({col}, chr(13)) = 0"


DDL = f"""
CREATE TABLE meta (
    key text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE archive_heads (
    table_id text PRIMARY KEY CHECK (length(table_id) > 0 AND {_plain("table_id")}),
    head_seq bigint NOT NULL CHECK (head_seq >= 1),
    head_hash text NOT NULL CHECK (length(head_hash) = 64),
    head_at text NOT NULL,
    archived_at timestamptz NOT NULL
);
CREATE TABLE archive_rows (
    table_id text NOT NULL CHECK (length(table_id) > 0 AND {_plain("table_id")}),
    seq bigint NOT NULL CHECK (seq >= 1),
    at text NOT NULL CHECK (length(at) > 0 AND {_plain("at")}),
    round bigint CHECK (round IS NULL OR round >= 0),
    seat bigint NOT NULL CHECK (seat >= 0),
    kind text NOT NULL CHECK (length(kind) > 0 AND {_plain("kind")}),
    category text NOT NULL CHECK (category IN ('engine', 'system', 'operator', 'parameter')),
    actor text NOT NULL CHECK ({_plain("actor")}),
    idem_key text CHECK (idem_key IS NULL OR (length(idem_key) > 0 AND {_plain("idem_key")})),
    idem_last bigint CHECK ((idem_key IS NULL) = (idem_last IS NULL)),
    data text NOT NULL CHECK (data::jsonb IS NOT NULL),
    prev_hash text NOT NULL CHECK (length(prev_hash) = 64),
    hash text NOT NULL CHECK (length(hash) = 64),
    archived_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (table_id, seq)
);
CREATE TABLE archive_alarms (
    id bigserial PRIMARY KEY,
    table_id text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    code text NOT NULL,
    seq bigint NOT NULL,
    detail text NOT NULL
);
CREATE TABLE lease (
    name text PRIMARY KEY,
    holder text NOT NULL,
    token bigint NOT NULL CHECK (token >= 0),
    acquired_at timestamptz,
    expires_at timestamptz NOT NULL
);
INSERT INTO lease (name, holder, token, expires_at) VALUES ('writer', '', 0, '-infinity');
CREATE FUNCTION progressived_archive_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION '% is append-only', TG_TABLE_NAME; END $$;
CREATE TRIGGER rows_append_only BEFORE UPDATE OR DELETE ON archive_rows
    FOR EACH ROW EXECUTE FUNCTION progressived_archive_append_only();
CREATE TRIGGER rows_no_truncate BEFORE TRUNCATE ON archive_rows
    FOR EACH STATEMENT EXECUTE FUNCTION progressived_archive_append_only();
CREATE TRIGGER alarms_append_only BEFORE UPDATE OR DELETE ON archive_alarms
    FOR EACH ROW EXECUTE FUNCTION progressived_archive_append_only();
CREATE TRIGGER alarms_no_truncate BEFORE TRUNCATE ON archive_alarms
    FOR EACH STATEMENT EXECUTE FUNCTION progressived_archive_append_only()
"""

DROP = (
    "DROP TABLE IF EXISTS meta, archive_heads, archive_rows, archive_alarms, lease CASCADE; "
    "DROP FUNCTION IF EXISTS progressived_archive_append_only() CASCADE"
)

COLUMNS = (
    "seq, at, round, seat, kind, category, actor, idem_key, idem_last, data, prev_hash, hash"
)
COPY_ROWS = f"COPY archive_rows (table_id, {COLUMNS}) FROM STDIN"
MOVE_HEAD = """
INSERT INTO archive_heads (table_id, head_seq, head_hash, head_at, archived_at)
VALUES (%s, %s, %s, %s, clock_timestamp())
ON CONFLICT (table_id) DO UPDATE SET head_seq = excluded.head_seq,
    head_hash = excluded.head_hash, head_at = excluded.head_at,
    archived_at = excluded.archived_at"""
INSERT_ALARM = (
    "INSERT INTO archive_alarms (table_id, code, seq, detail) VALUES (%s, %s, %s, %s)"
)
HEADS = "SELECT table_id, head_seq, head_hash FROM archive_heads ORDER BY table_id"
HASHES = (
    "SELECT seq, hash FROM archive_rows WHERE table_id = %s AND seq >= %s AND seq <= %s "
    "ORDER BY seq"
)
ROWS = f"SELECT {COLUMNS} FROM archive_rows WHERE table_id = %s ORDER BY seq"
SET_META = (
    "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) "
    "DO UPDATE SET value = excluded.value"
)
