"""A ledger's tables in PostgreSQL: the SQLite ledger's rows and columns, types mapped.

The same tables and columns as a SQLite ledger (docs/ledger.md), so the same canonical row
text and hash chain: ``INTEGER`` is ``bigint``, ``TEXT`` is ``text``. ``data`` and a
snapshot's ``state`` stay ``text``, not ``jsonb``: the hash covers the stored JSON text byte
for byte, and ``jsonb`` would re-serialise it (the CHECK still parses it). The constraints
are SQLite's (no ``|``, CR or LF in the hashed text fields, amounts integers); ``journal``,
``postings`` and ``snapshots`` are append-only (triggers refuse UPDATE, DELETE and
TRUNCATE). The tables a link ledger never uses (a table's ``outbox`` and ``link_outbox``) are
not made; ``lease`` is added: the writer's lease (:mod:`progressived.storage.port`).
"""

from __future__ import annotations

SCHEMA_VERSION = 1
APPLICATION_ID = "0x50524f47"  # "PROG", as a SQLite ledger's PRAGMA application_id
LEDGER_TABLES = ("meta", "journal", "postings", "balances", "idempotency", "snapshots", "lease")


def _plain(col: str) -> str:
    """The hashed text fields may not hold '|' or line breaks (progressived.ledger.chain)."""
    return f"strpos({col}, '|') = 0 AND strpos({col}, chr(10)) = 0 AND strpos({col}, chr(13)) = 0"


DDL = f"""
CREATE TABLE meta (
    key text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE journal (
    seq bigint PRIMARY KEY CHECK (seq >= 1),
    at text NOT NULL CHECK (length(at) > 0 AND {_plain("at")}),
    table_id text NOT NULL CHECK (length(table_id) > 0 AND {_plain("table_id")}),
    round bigint CHECK (round IS NULL OR round >= 0),
    seat bigint NOT NULL CHECK (seat >= 0),
    kind text NOT NULL CHECK (length(kind) > 0 AND {_plain("kind")}),
    category text NOT NULL CHECK (category IN ('engine', 'system', 'operator', 'parameter')),
    actor text NOT NULL CHECK ({_plain("actor")}),
    idem_key text CHECK (idem_key IS NULL OR (length(idem_key) > 0 AND {_plain("idem_key")})),
    data text NOT NULL CHECK (data::jsonb IS NOT NULL),
    prev_hash text NOT NULL CHECK (length(prev_hash) = 64),
    hash text NOT NULL CHECK (length(hash) = 64)
);
CREATE INDEX journal_kind ON journal (kind, seq);
CREATE TABLE postings (
    seq bigint NOT NULL REFERENCES journal (seq),
    leg bigint NOT NULL CHECK (leg >= 0),
    account text NOT NULL CHECK (length(account) > 0),
    units bigint NOT NULL,
    PRIMARY KEY (seq, leg)
);
CREATE TABLE balances (
    account text PRIMARY KEY,
    units bigint NOT NULL,
    seq bigint NOT NULL CHECK (seq >= 1)
);
CREATE TABLE idempotency (
    key text PRIMARY KEY CHECK (length(key) > 0),
    first_seq bigint NOT NULL CHECK (first_seq >= 1),
    last_seq bigint NOT NULL CHECK (last_seq >= first_seq - 1)
);
CREATE TABLE snapshots (
    seq bigint PRIMARY KEY CHECK (seq >= 1),
    hash text NOT NULL CHECK (length(hash) = 64),
    state text NOT NULL CHECK (state::jsonb IS NOT NULL)
);
CREATE TABLE lease (
    name text PRIMARY KEY,
    holder text NOT NULL,
    token bigint NOT NULL CHECK (token >= 0),
    acquired_at timestamptz,
    expires_at timestamptz NOT NULL
);
INSERT INTO lease (name, holder, token, expires_at) VALUES ('writer', '', 0, '-infinity');
CREATE FUNCTION progressived_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION '% is append-only', TG_TABLE_NAME; END $$;
CREATE TRIGGER journal_append_only BEFORE UPDATE OR DELETE ON journal
    FOR EACH ROW EXECUTE FUNCTION progressived_append_only();
CREATE TRIGGER journal_no_truncate BEFORE TRUNCATE ON journal
    FOR EACH STATEMENT EXECUTE FUNCTION progressived_append_only();
CREATE TRIGGER postings_append_only BEFORE UPDATE OR DELETE ON postings
    FOR EACH ROW EXECUTE FUNCTION progressived_append_only();
CREATE TRIGGER postings_no_truncate BEFORE TRUNCATE ON postings
    FOR EACH STATEMENT EXECUTE FUNCTION progressived_append_only();
CREATE TRIGGER snapshots_append_only BEFORE UPDATE OR DELETE ON snapshots
    FOR EACH ROW EXECUTE FUNCTION progressived_append_only();
CREATE TRIGGER snapshots_no_truncate BEFORE TRUNCATE ON snapshots
    FOR EACH STATEMENT EXECUTE FUNCTION progressived_append_only()
"""

DROP = (
    "DROP TABLE IF EXISTS meta, journal, postings, balances, idempotency, snapshots, lease "
    "CASCADE; DROP FUNCTION IF EXISTS progressived_append_only() CASCADE"
)

# The chain checker's rows (progressived.ledger.chain), the text built as SQLite builds it.
CHAIN_ROWS = """
SELECT seq, prev_hash, hash,
  prev_hash || '|' || seq || '|' || at || '|' || table_id || '|' || coalesce(round::text, '')
  || '|' || seat || '|' || kind || '|' || category || '|' || actor || '|' ||
  coalesce(idem_key, '') || '|' || data
FROM journal WHERE seq > %s AND seq <= %s ORDER BY seq"""

SNAPSHOTS = (
    "SELECT s.seq, s.hash, j.hash FROM snapshots s LEFT JOIN journal j "
    "ON j.seq = s.seq ORDER BY s.seq DESC LIMIT %s"
)
ROWS = "SELECT seq, kind, data FROM journal WHERE seq > %s ORDER BY seq"

INSERT_JOURNAL = (
    "INSERT INTO journal (seq, at, table_id, round, seat, kind, category, actor, idem_key, "
    "data, hash, prev_hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
INSERT_POSTINGS = "INSERT INTO postings (seq, leg, account, units) VALUES (%s, %s, %s, %s)"
UPSERT_BALANCES = (
    "INSERT INTO balances (account, units, seq) VALUES (%s, %s, %s) ON CONFLICT (account) "
    "DO UPDATE SET units = excluded.units, seq = excluded.seq"
)
INSERT_KEYS = "INSERT INTO idempotency (key, first_seq, last_seq) VALUES (%s, %s, %s)"
INSERT_SNAPSHOT = "INSERT INTO snapshots (seq, hash, state) VALUES (%s, %s, %s)"
SET_META = (
    "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) "
    "DO UPDATE SET value = excluded.value"
)

_EPOCH = "extract(epoch FROM expires_at)::float8"
# The lease, by the database's clock (clock_timestamp(): now, not the transaction's start).
ACQUIRE = f"""
UPDATE lease SET holder = %(holder)s, token = token + 1, acquired_at = clock_timestamp(),
    expires_at = clock_timestamp() + make_interval(secs => %(ttl)s)
WHERE name = %(name)s AND (holder = %(holder)s OR expires_at <= clock_timestamp())
RETURNING token, {_EPOCH}"""
# Checks and extends: the lease must still be this holder's, this token's, and unexpired.
EXTEND = f"""
UPDATE lease SET expires_at = clock_timestamp() + make_interval(secs => %(ttl)s)
WHERE name = %(name)s AND holder = %(holder)s AND token = %(token)s
    AND expires_at > clock_timestamp()
RETURNING {_EPOCH}"""
RELEASE = """
UPDATE lease SET expires_at = least(expires_at, clock_timestamp())
WHERE name = %(name)s AND holder = %(holder)s AND token = %(token)s"""
READ_LEASE = f"""
SELECT holder, token, {_EPOCH}, extract(epoch FROM clock_timestamp())::float8
FROM lease WHERE name = %(name)s"""
