"""The PostgreSQL adapter of the storage port: a ledger in a database (psycopg 3).

For a link ledger that must survive the loss of a machine: PostgreSQL replicates it
(synchronously, failed over by Patroni), and several link controllers can reach it, so the
one writer is whoever holds the **lease** (:mod:`progressived.storage.port`), not a lock file.

**Fencing.** Every write transaction ends with an ``UPDATE`` of the lease row that matches
only this holder, this token and an unexpired lease (by the database's ``clock_timestamp()``),
and extends it; COMMIT is sent only once its answer is in (BEGIN, the rows and the fence go
in one pipelined round trip, COMMIT in a second); no row matched -> :class:`Fenced`,
ROLLBACK, nothing stored. Why that is enough, at READ COMMITTED: the ``UPDATE`` takes the
lease row's lock until our COMMIT, so an acquire (an ``UPDATE`` of the same row) waits for
our commit and is ordered after it; and if an acquire committed first -- even one that
committed after our transaction began -- our ``UPDATE`` re-reads the newest row version
(PostgreSQL re-checks the WHERE clause of an ``UPDATE`` on a concurrently updated row), sees
the new token and matches nothing. So no write of an old holder commits after a new holder
acquired. A holder that stops between that ``UPDATE`` and COMMIT (paused, cut off) would
hold the row lock and keep the next holder waiting: the session's
``idle_in_transaction_session_timeout`` (the lease's term) makes the server end such a
transaction, rolled back.

**Durability.** The writer's session runs with ``synchronous_commit`` at least ``on`` (a
server-wide ``off``, ``local`` or ``remote_write`` is raised to ``on``): COMMIT returns once
the rows are flushed where the server's replication settings say (docs/link.md).

**A lost connection** (the primary died, a failover): a statement or COMMIT that fails with
a connection error raises :class:`LedgerUnavailable`; for COMMIT its outcome is unknown.
The next call connects again -- a multi-host URL with ``target_session_attrs=read-write``
finds the new primary -- and the ledger re-reads the head before anything else
(:class:`progressived.link.store.ledger.LinkLedger`).

The password comes from libpq's own sources (``PGPASSFILE``, ``~/.pgpass``, a ``passfile=``
in the URL) or ``password`` (read from ``[ledger] password_file``); never from the URL in a
configuration file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import psycopg
from psycopg import conninfo, sql

from progressived.storage import postgres_schema as ddl
from progressived.storage.errors import (
    Fenced,
    LeaseHeld,
    LedgerError,
    LedgerExists,
    LedgerMismatch,
    LedgerMissing,
    LedgerUnavailable,
    one_line,
)
from progressived.storage.location import shown
from progressived.storage.port import LEASE, ChainRow, Lease, Writable
from progressived.storage.postgres_states import is_unavailable

GENESIS = "0" * 64
CONNECT_TIMEOUT_S = 5
LOCK_TIMEOUT = "5s"  # an acquire waiting on a holder's open transaction gives up (retry)
STREAM_ROWS = 2000  # rows fetched per round trip when replaying

class PostgresStore:
    """A ledger in a PostgreSQL database; one writer at a time, by the lease."""

    kind = "postgresql"

    def __init__(self, url: str, password: str | None = None) -> None:
        self.url = url
        self.where = shown(url)
        self._password = password
        self._conn: psycopg.Connection[Any] | None = None
        self._aside: psycopg.Connection[Any] | None = None  # renew_aside's, during a rebuild
        self._lease_ttl_s = 0.0  # the session's idle-transaction timeout follows the lease
        # Who is connected, as pg_stat_activity shows it: the lease's holder and token once
        # acquired ("progressived ctl-a token 7"), so a DBA sees which writer is which.
        self._app_name = "progressived"
        self._made = False  # this store initialised the database (remove() may undo it)
        self.closed = False

    # ------------------------------------------------------------------ connecting

    @classmethod
    def open(
        cls,
        url: str,
        presence: str,
        ledger_id: str,
        at: str,
        software: str,
        *,
        password: str | None = None,
    ) -> PostgresStore:
        """Connect and check the database: ``existing`` must hold a ledger
        (:class:`LedgerMissing` if it holds nothing, :class:`LedgerMismatch` if it holds
        something else or a newer schema); ``new`` must hold nothing (:class:`LedgerExists`
        for a ledger, :class:`LedgerMismatch` for other tables) and gets the tables and the
        ``meta`` rows, in one transaction."""
        store = cls(url, password)
        try:
            tables = store._tables()
            if presence == "new":
                store._initialise(tables, ledger_id, at, software)
            else:
                store._check(tables)
        except BaseException:
            store.close()
            raise
        return store

    def _connect(self) -> psycopg.Connection[Any]:
        params = conninfo.conninfo_to_dict(self.url)
        extra: dict[str, Any] = {"application_name": self._app_name}
        if "connect_timeout" not in params:
            extra["connect_timeout"] = CONNECT_TIMEOUT_S
        if self._password is not None:
            extra["password"] = self._password
        try:
            conn = psycopg.connect(self.url, autocommit=True, prepare_threshold=None, **extra)
        except psycopg.Error as exc:
            raise LedgerUnavailable(
                f"ledger {self.where}: cannot connect: {one_line(exc)}"
            ) from None
        try:
            level = conn.execute("SHOW synchronous_commit").fetchone()
            if level is None or level[0] in ("off", "local", "remote_write"):
                conn.execute("SET synchronous_commit = on")
            conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
            self._set_idle_timeout(conn)
        except psycopg.Error as exc:
            conn.close()
            raise self._translate(exc) from None
        return conn

    def _set_idle_timeout(self, conn: psycopg.Connection[Any]) -> None:
        ms = max(1000, int(self._lease_ttl_s * 1000)) if self._lease_ttl_s else 0
        conn.execute(
            sql.SQL("SET idle_in_transaction_session_timeout = {}").format(sql.Literal(ms))
        )

    def connection(self) -> psycopg.Connection[Any]:
        """The live connection, connecting again after a lost one."""
        if self.closed:
            raise LedgerError(f"ledger {self.where} is closed")
        if self._conn is None or self._conn.closed or self._conn.broken:
            if self._conn is not None:
                self._conn.close()
            self._conn = self._connect()
        return self._conn

    def _translate(self, exc: psycopg.Error) -> LedgerError:
        if is_unavailable(exc):
            if self._conn is not None and (self._conn.broken or exc.sqlstate in ("25006",)):
                self._conn.close()  # a standby, or a dead connection: connect again next time
            return LedgerUnavailable(f"ledger {self.where} cannot be written now: {one_line(exc)}")
        return LedgerError(f"ledger {self.where}: {one_line(exc)}")

    def _query(self, query: str, args: Any = None) -> list[tuple[Any, ...]]:
        try:
            return list(self.connection().execute(query, args).fetchall())
        except psycopg.Error as exc:
            raise self._translate(exc) from None

    def _tables(self) -> set[str]:
        rows = self._query("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        return {str(name) for (name,) in rows}

    def _initialise(self, tables: set[str], ledger_id: str, at: str, software: str) -> None:
        if "journal" in tables or "meta" in tables:
            raise LedgerExists(
                f"{self.where} already holds a ledger: progressived init creates a new ledger "
                "and never overwrites one"
            )
        if tables:
            raise LedgerMismatch(
                f"{self.where} holds other tables ({', '.join(sorted(tables)[:5])}): "
                "refusing to make a ledger there (give it a database of its own)"
            )
        meta = {
            "application_id": ddl.APPLICATION_ID,
            "schema_version": str(ddl.SCHEMA_VERSION),
            "table_id": ledger_id,
            "created_at": at,
            "software": software,
            "head_seq": "0",
            "head_hash": GENESIS,
        }
        try:
            conn = self.connection()
            with conn.transaction():
                conn.execute(ddl.DDL)
                conn.cursor().executemany(ddl.SET_META, list(meta.items()))
        except psycopg.errors.DuplicateTable:
            raise LedgerExists(f"{self.where} already holds a ledger (made meanwhile)") from None
        except psycopg.Error as exc:
            raise self._translate(exc) from None
        self._made = True

    def _check(self, tables: set[str]) -> None:
        if not tables:
            raise LedgerMissing(
                f"no ledger in {self.where}: a missing ledger is not an empty one; create it "
                "with `progressived init --config FILE`, or fix [ledger] url"
            )
        if not set(ddl.LEDGER_TABLES) <= tables:
            raise LedgerMismatch(
                f"{self.where} is not a progressived ledger (tables "
                f"{', '.join(sorted(tables)[:8])})"
            )
        meta = self.meta()
        if meta.get("application_id") != ddl.APPLICATION_ID:
            raise LedgerMismatch(f"{self.where} is not a progressived ledger (no application_id)")
        version = int(meta.get("schema_version", "0"))
        if version > ddl.SCHEMA_VERSION:
            raise LedgerMismatch(
                f"{self.where} has schema version {version}, newer than this software's "
                f"{ddl.SCHEMA_VERSION}: upgrade progressived before opening it"
            )

    def file_problem(self) -> str | None:
        """A database is no file under this process: nothing to lose under it."""
        return None

    def remove(self) -> None:
        """Drop the tables this store made (an ``init`` that failed half way), then close."""
        try:
            if self._made:
                self.connection().execute(ddl.DROP)
        except (psycopg.Error, LedgerError):
            pass  # the database is gone as well: nothing is left to block a retry
        finally:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._end_aside()
        if self._conn is not None:
            self._conn.close()

    # ------------------------------------------------------------------ reading

    def meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._query("SELECT key, value FROM meta")}

    def last(self) -> tuple[int, str]:
        rows = self._query("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1")
        return (0, GENESIS) if not rows else (int(rows[0][0]), str(rows[0][1]))

    def balances(self) -> dict[str, int]:
        return {str(a): int(u) for a, u in self._query("SELECT account, units FROM balances")}

    def snapshots(self, limit: int) -> list[tuple[int, str, str | None]]:
        rows = self._query(ddl.SNAPSHOTS, (limit,))
        return [(int(s), str(h), None if j is None else str(j)) for s, h, j in rows]

    def snapshot_text(self, seq: int) -> str:
        rows = self._query("SELECT state FROM snapshots WHERE seq = %s", (seq,))
        if not rows:
            raise LedgerError(f"ledger {self.where}: no snapshot at row {seq}")
        return str(rows[0][0])

    def chain_rows(self, after: int, upto: int) -> Iterator[ChainRow]:
        yield from self._stream(ddl.CHAIN_ROWS, (after, upto))

    def rows(self, after: int) -> Iterator[tuple[int, str, str]]:
        yield from self._stream(ddl.ROWS, (after,))

    def _stream(self, query: str, args: tuple[object, ...]) -> Iterator[Any]:
        try:
            with self.connection().cursor() as cur:
                yield from cur.stream(query, args, size=STREAM_ROWS)
        except psycopg.Error as exc:
            raise self._translate(exc) from None

    # ------------------------------------------------------------------ writing

    def write(
        self,
        rows: Writable,
        *,
        meta: Mapping[str, str] | None = None,
        fence: Lease | None = None,
    ) -> None:
        """One transaction in two round trips: BEGIN, the rows and the fence pipelined, then
        COMMIT once the fence's answer is in (so a fenced writer commits nothing)."""
        self._end_aside()  # writing on the main connection: the rebuild is over
        conn = self.connection()
        try:
            with conn.pipeline() as pipeline, conn.transaction():
                cur = conn.cursor()
                if rows.journal:
                    cur.executemany(ddl.INSERT_JOURNAL, rows.journal)
                if rows.postings:
                    cur.executemany(ddl.INSERT_POSTINGS, rows.postings)
                if rows.balances:
                    cur.executemany(ddl.UPSERT_BALANCES, rows.balances)
                if rows.keys:
                    cur.executemany(ddl.INSERT_KEYS, rows.keys)
                if rows.snapshot is not None:
                    cur.execute(ddl.INSERT_SNAPSHOT, rows.snapshot)
                if rows.outbox:
                    raise LedgerError(f"ledger {self.where}: no outbox in a database ledger")
                # the new head (with journal rows), unless ``meta`` names it itself
                head = {"head_seq": str(rows.head.seq), "head_hash": rows.head.hash}
                settings = {**(head if rows.journal else {}), **(meta or {})}
                if settings:
                    cur.executemany(ddl.SET_META, list(settings.items()))
                if fence is not None:
                    fenced = self._send_extend(conn.cursor(), fence)
                    pipeline.sync()
                    self._extended(fenced, fence)
        except psycopg.Error as exc:
            raise self._translate(exc) from None

    # ------------------------------------------------------------------ the lease

    def _send_extend(self, cur: psycopg.Cursor[Any], lease: Lease) -> psycopg.Cursor[Any]:
        """The fence: the lease must be current; extended by its term. In the caller's
        transaction (a write's, or renew's own); its answer read by :meth:`_extended`."""
        args = {"name": LEASE, "holder": lease.holder, "token": lease.token, "ttl": lease.ttl_s}
        return cur.execute(ddl.EXTEND, args)

    def _extended(self, cur: psycopg.Cursor[Any], lease: Lease) -> float:
        row = cur.fetchone()
        if row is None:
            raise Fenced(
                f"ledger {self.where}: the lease of {lease.holder!r} (token {lease.token}) is "
                "no longer current (it lapsed, was released or another holder acquired it): "
                "nothing was written"
            )
        return float(row[0])

    def lease(self) -> Lease | None:
        rows = self._query(ddl.READ_LEASE, {"name": LEASE})
        if not rows or int(rows[0][1]) == 0:
            return None
        holder, token, expires, _now = rows[0]
        return Lease(str(holder), int(token), float(expires), 0.0)

    def acquire(self, holder: str, ttl_s: float) -> Lease:
        args = {"name": LEASE, "holder": holder, "ttl": ttl_s}
        rows = self._query(ddl.ACQUIRE, args)
        if not rows:
            found = self._query(ddl.READ_LEASE, {"name": LEASE})
            who, token, expires, now = found[0] if found else ("?", 0, 0.0, 0.0)
            raise LeaseHeld(
                f"ledger {self.where} is leased to {who!r} (token {token}) for "
                f"{float(expires) - float(now):.1f} s more",
                holder=str(who),
                token=int(token),
                expires_in_s=float(expires) - float(now),
            )
        self._lease_ttl_s = ttl_s
        self._app_name = f"progressived {holder} token {int(rows[0][0])}"
        try:
            conn = self.connection()
            self._set_idle_timeout(conn)
            conn.execute(
                sql.SQL("SET application_name = {}").format(sql.Literal(self._app_name))
            )
        except psycopg.Error as exc:
            raise self._translate(exc) from None
        return Lease(holder, int(rows[0][0]), float(rows[0][1]), ttl_s)

    def renew(self, lease: Lease) -> Lease:
        self._end_aside()  # renewing on the main connection: the rebuild is over
        return self._renew_on(self.connection(), lease)

    def renew_aside(self, lease: Lease) -> Lease:
        """On a second connection kept for the rebuild's later renewals (a new one each time
        pays a frozen host's connect timeout, more than a third of the term, each time)."""
        if self._aside is None or self._aside.closed or self._aside.broken:
            self._end_aside()
            self._aside = self._connect()  # LedgerUnavailable when it cannot be reached
        try:
            return self._renew_on(self._aside, lease)
        except LedgerError:
            self._end_aside()
            raise

    def _end_aside(self) -> None:
        if self._aside is not None:
            self._aside.close()
            self._aside = None

    def _renew_on(self, conn: psycopg.Connection[Any], lease: Lease) -> Lease:
        try:
            with conn.transaction():
                cur = conn.cursor()
                expires = self._extended(self._send_extend(cur, lease), lease)
        except psycopg.Error as exc:
            raise self._translate(exc) from None
        return Lease(lease.holder, lease.token, expires, lease.ttl_s)

    def release(self, lease: Lease) -> None:
        self._query(
            ddl.RELEASE + " RETURNING token",
            {"name": LEASE, "holder": lease.holder, "token": lease.token},
        )
