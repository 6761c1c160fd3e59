"""The archive's database: the storage port's PostgreSQL adapter, with the archive's tables.

:class:`ArchiveStore` is :class:`~progressived.storage.postgres.PostgresStore` (the same
connection rules: psycopg 3, the multi-host URL with ``target_session_attrs=read-write``,
``synchronous_commit`` at least ``on``, what an error means; and the same **lease** with its
fencing token) over the archive's tables (:mod:`progressived.archive.store.schema`) instead
of a ledger's. One transaction per batch: the rows of every table in it, their heads and
the alarms, then the fence (the lease must still be this writer's) and COMMIT; a writer
whose lease lapsed or was taken stores nothing (:class:`~progressived.storage.errors.Fenced`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from progressived.archive.core.chain import Head
from progressived.archive.core.wire import Row
from progressived.archive.store import schema
from progressived.storage.errors import LedgerExists, LedgerMismatch, LedgerMissing
from progressived.storage.port import Lease
from progressived.storage.postgres import PostgresStore


@dataclass(frozen=True, slots=True)
class TableWrite:
    """A table's new rows in one batch, and its head after them."""

    table: str
    rows: tuple[Row, ...]
    head: Head


@dataclass(frozen=True, slots=True)
class Alarm:
    table: str
    code: str
    seq: int
    detail: str


def row_values(table: str, row: Row) -> tuple[object, ...]:
    return (
        table,
        row.seq,
        row.at,
        row.round,
        row.seat,
        row.kind,
        row.category,
        row.actor,
        row.idem_key,
        row.idem_last,
        row.data,
        row.prev_hash,
        row.hash,
    )


class ArchiveStore(PostgresStore):
    """The archive's database (one per site)."""

    @classmethod
    def open_archive(
        cls, url: str, presence: str, archive_id: str, at: str, *, password: str | None = None
    ) -> ArchiveStore:
        """``existing``: the archive's tables must be there (:class:`LedgerMissing` for an
        empty database, :class:`LedgerMismatch` for another one's); ``new``: an empty
        database gets them (:class:`LedgerExists` if it holds an archive)."""
        store = cls(url, password)
        try:
            tables = store._tables()
            if presence == "new":
                store._make(tables, archive_id, at)
            else:
                store._check_archive(tables)
        except BaseException:
            store.close()
            raise
        return store

    def _make(self, tables: set[str], archive_id: str, at: str) -> None:
        if "archive_rows" in tables:
            raise LedgerExists(f"{self.where} already holds an archive")
        if tables:
            raise LedgerMismatch(
                f"{self.where} holds other tables ({', '.join(sorted(tables)[:5])}): the "
                "archive wants a database of its own"
            )
        meta = {
            "application_id": schema.APPLICATION_ID,
            "kind": schema.KIND,
            "schema_version": str(schema.SCHEMA_VERSION),
            "archive_id": archive_id,
            "created_at": at,
        }
        try:
            conn = self.connection()
            with conn.transaction():
                conn.execute(schema.DDL)
                conn.cursor().executemany(schema.SET_META, list(meta.items()))
        except psycopg.Error as exc:
            raise self._translate(exc) from None

    def _check_archive(self, tables: set[str]) -> None:
        if not tables:
            raise LedgerMissing(
                f"no archive in {self.where}: make it once with "
                "`progressived archive --config FILE --init`"
            )
        if not set(schema.TABLES) <= tables:
            raise LedgerMismatch(f"{self.where} is not a progressived archive")
        meta = self.meta()
        if meta.get("kind") != schema.KIND or meta.get("application_id") != schema.APPLICATION_ID:
            raise LedgerMismatch(f"{self.where} is not a progressived archive")
        if int(meta.get("schema_version", "0")) > schema.SCHEMA_VERSION:
            raise LedgerMismatch(f"{self.where} is a newer archive: upgrade progressived")

    # ------------------------------------------------------------------ reading
    def heads(self) -> dict[str, Head]:
        return {str(t): Head(int(s), str(h)) for t, s, h in self._query(schema.HEADS)}

    def hashes(self, table: str, low: int, high: int) -> dict[int, str]:
        rows = self._query(schema.HASHES, (table, low, high))
        return {int(s): str(h) for s, h in rows}

    def table_rows(self, table: str) -> Iterator[Row]:
        """Every archived row of ``table``, in order (streamed)."""
        for values in self._stream(schema.ROWS, (table,)):
            yield _row(values)

    # ------------------------------------------------------------------ writing
    def store(self, writes: Sequence[TableWrite], alarms: Sequence[Alarm], fence: Lease) -> None:
        """Rows, heads and alarms in ONE transaction, committed only under ``fence``."""
        conn = self.connection()
        try:
            with conn.transaction():
                # The rows by COPY (a few times faster than one INSERT per row), then the
                # heads, the alarms and the fence pipelined; COMMIT once the fence answered.
                with conn.cursor().copy(schema.COPY_ROWS) as copy:
                    for w in writes:
                        for r in w.rows:
                            copy.write_row(row_values(w.table, r))
                self._finish(conn, writes, alarms, fence)
        except psycopg.Error as exc:
            raise self._translate(exc) from None

    def _finish(
        self,
        conn: psycopg.Connection[Any],
        writes: Sequence[TableWrite],
        alarms: Sequence[Alarm],
        fence: Lease,
    ) -> None:
        """The heads, the alarms and the fence, pipelined, in the caller's transaction."""
        with conn.pipeline() as pipeline:
            cur = conn.cursor()
            heads = [(w.table, w.head.seq, w.head.hash, w.rows[-1].at) for w in writes if w.rows]
            if heads:
                cur.executemany(schema.MOVE_HEAD, heads)
            if alarms:
                cur.executemany(
                    schema.INSERT_ALARM, [(a.table, a.code, a.seq, a.detail) for a in alarms]
                )
            fenced = self._send_extend(conn.cursor(), fence)
            pipeline.sync()
            self._extended(fenced, fence)


def _row(values: Sequence[Any]) -> Row:
    seq, at, rnd, seat, kind, category, actor, idem, last, data, prev, hsh = values
    return Row(
        seq=int(seq),
        at=str(at),
        round=None if rnd is None else int(rnd),
        seat=int(seat),
        kind=str(kind),
        category=str(category),
        actor=str(actor),
        idem_key=None if idem is None else str(idem),
        idem_last=None if last is None else int(last),
        data=str(data),
        prev_hash=str(prev),
        hash=str(hsh),
    )
