"""The table's side of the archive: its journal, after the archived head, to the archive.

**The outbox is the journal itself.** Every row after the archive's head is waiting to be
sent: the ledger already holds it durably (``synchronous=FULL``), so nothing is written a
second time on the SD card for the archive, and the round's transaction does not change.
The archive's retained head (``<prefix>/archive/<table>/head``) is the acknowledgement:
rows up to it are stored in the floor's database, chain-checked; the rows after it are
sent again until the head moves past them (docs/archive.md, "The table's side").

**Never in the path of a round.** The feed reads the ledger on its own read-only
connection (WAL: it never blocks the writer) on its own thread, and publishes on the
table's one broker session beside the signs' outbox. A slow or absent archive only makes
the lag grow; past ``[archive] max_lag_rows`` or ``max_lag_s`` the table is *degraded*
(the health says why), never closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import aiomqtt
import structlog

from progressived.archive.core import wire
from progressived.archive.core.wire import ArchiveWireError, HeadMessage, Row
from progressived.ledger.errors import LedgerError
from progressived.ledger.readonly import connect_readonly
from progressived.mqtt.session import MqttSession

log = structlog.get_logger("progressived.archive")

ROWS = """
SELECT j.seq, j.at, j.round, j.seat, j.kind, j.category, j.actor, j.idem_key,
       CASE WHEN j.idem_key IS NULL THEN NULL ELSE coalesce(i.last_seq, j.seq) END,
       j.data, j.prev_hash, j.hash
FROM journal j LEFT JOIN idempotency i ON i.key = j.idem_key AND i.first_seq = j.seq
WHERE j.seq > ? ORDER BY j.seq LIMIT ?"""
ROW_AT = "SELECT at FROM journal WHERE seq = ?"
ROW_HASH = "SELECT hash FROM journal WHERE seq = ?"
HELLO_S = 2.0  # after connecting, wait this long for the retained head before sending
WINDOW_ROWS = 5_000  # rows sent beyond the archived head before waiting for it to move
ROOM = wire.MAX_MESSAGE - 1_024  # a message's rows stay under the bound, with room to spare
CURABLE = ("resend", "ok")


def epoch(at: str) -> float | None:
    """A row's ``at`` (UTC ISO-8601) as seconds since the epoch; None if unreadable."""
    try:
        return datetime.fromisoformat(at).timestamp()
    except ValueError:
        return None


def read_rows(
    conn: sqlite3.Connection, after: int, room: int = ROOM
) -> tuple[list[Row], int | None]:
    """The ledger's rows after ``after`` that fit in one message (at most
    :data:`~progressived.archive.core.wire.MAX_ROWS`, ``room`` bytes), and the row that
    cannot fit even alone, if the first one is such a row."""
    rows: list[Row] = []
    size = 100
    for values in conn.execute(ROWS, (after, wire.MAX_ROWS)):
        seq, at, rnd, seat, kind, cat, actor, idem, last, data, prev, hsh = values
        row = Row(seq, at, rnd, seat, kind, cat, actor, idem, last, data, prev, hsh)
        size += len(wire.dumps(row.to_wire())) + 1
        if size > room:
            return rows, (row.seq if not rows else None)
        rows.append(row)
    return rows, None


class ArchiveFeed:
    """Sends the journal after the archived head; knows how far behind the archive is."""

    def __init__(
        self,
        *,
        session: MqttSession,
        prefix: str,
        table_id: str,
        ledger_path: Path,
        head_seq: Callable[[], int],
        max_lag_rows: int,
        max_lag_s: float,
        resend_s: float,
        note: Callable[[str], None],
    ) -> None:
        self.session = session
        self.table = table_id
        self.rows_topic = wire.rows_topic(prefix, table_id)
        self.head_topic = wire.head_topic(prefix, table_id)
        self.path = ledger_path
        self.head_seq = head_seq
        self.max_lag_rows, self.max_lag_s, self.resend_s = max_lag_rows, max_lag_s, resend_s
        self.note = note  # the health's archive reason ("" when within the lag)
        self.answer: HeadMessage | None = None  # the archive's last answer
        self.sent = 0  # the last row sent since the archived head
        self.messages_sent = 0
        self.unreadable = 0
        self.too_large: int | None = None  # a row that cannot fit in a message
        self.read_error = ""  # why the last read of the ledger failed ("" : it did not)
        self.mismatch = ""  # the archived head is not a row of this ledger ("": it is)
        self._checked: tuple[int, str] = (0, "")  # the archived head last found in the ledger
        self.lag_rows = 0
        self.lag_seconds = 0.0
        self._oldest: tuple[int, float | None] = (0, None)  # (row, its time) after the head
        self._progress = time.monotonic()
        self._wake = asyncio.Event()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="archive-feed")
        self._conn: sqlite3.Connection | None = None
        session.subscribe(self.head_topic, self._message)
        session.while_connected(self._pump)

    # ------------------------------------------------------------------ reading
    async def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn, *args)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = connect_readonly(self.path)
        return self._conn

    def _rows(self, after: int) -> list[Row]:
        rows, too_large = read_rows(self._connection(), after)
        if too_large is not None:
            self.too_large = too_large
        return rows

    def _row_hash(self, seq: int) -> str | None:
        found = self._connection().execute(ROW_HASH, (seq,)).fetchone()
        return None if found is None else str(found[0])

    def _row_at(self, seq: int) -> float | None:
        found = self._connection().execute(ROW_AT, (seq,)).fetchone()
        return None if found is None else epoch(str(found[0]))

    # ------------------------------------------------------------------ the archive's answer
    @property
    def archived(self) -> int:
        return 0 if self.answer is None else self.answer.seq

    async def _message(self, message: aiomqtt.Message) -> None:
        try:
            answer = wire.decode_head(bytes(message.payload or b""))
        except ArchiveWireError as exc:
            self.unreadable += 1
            log.warning("archive: unreadable answer ignored", code=exc.code, reason=exc.reason)
            return
        if answer.table != self.table:
            return
        if answer.seq != self.archived or answer.status != "ok":
            self._progress = time.monotonic()
        previous = self.answer
        self.answer = answer
        if answer.status == "refused" and (previous is None or previous.code != answer.code):
            log.error(
                "the archive refused this table's rows",
                code=answer.code,
                reason=answer.reason,
                archived=answer.seq,
            )
        if answer.status == "resend" or (previous is not None and answer.seq < previous.seq):
            self.sent = answer.seq  # send again from the archive's head
        self._wake.set()

    # ------------------------------------------------------------------ sending
    async def _pump(self) -> None:
        """While connected: the rows after the archived head, in order, a window at a time;
        everything unacknowledged again after ``resend_s`` without the head moving."""
        connected = time.monotonic()
        self.sent = self.archived
        while True:
            if self.answer is None and time.monotonic() - connected < HELLO_S:
                await self._nap(HELLO_S)
                continue
            base = self.archived
            refused = self.answer is not None and self.answer.status == "refused"
            self.sent = max(self.sent, base)
            # Unanswered for resend_s (a refused run: six times that): all of it again.
            pace = self.resend_s * (6 if refused else 1)
            if self.sent > base and time.monotonic() - self._progress >= pace:
                self.sent, self._progress = base, time.monotonic()
            waiting = refused and self.sent > base  # the refused run was sent: wait
            if not waiting and self.head_seq() > self.sent and self.sent - base < WINDOW_ROWS:
                rows = await self._guarded(self._rows, self.sent)
                if rows:
                    await self.session.publish(self.rows_topic, wire.encode_rows(self.table, rows))
                    self.sent = rows[-1].seq
                    self.messages_sent += 1
                    continue
            await self._nap(0.25)

    async def _guarded(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A read of the ledger for the archive; a fault is logged (once until a read
        succeeds) and answers None: the archive must never stop the table."""
        try:
            found = await self._read(fn, *args)
        except (sqlite3.Error, LedgerError, OSError) as exc:
            if not self.read_error:
                log.error("archive: cannot read the ledger for the archive", error=str(exc))
            self.read_error = str(exc)
            if self._conn is not None:  # opened again at the next read (on the feed's thread)
                conn, self._conn = self._conn, None
                self._pool.submit(conn.close)
            return None
        self.read_error = ""
        return found

    async def _nap(self, seconds: float) -> None:
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()

    # ------------------------------------------------------------------ lag and health
    async def run(self) -> None:
        """Every second, connected or not: the lag, and the health's reason."""
        while True:
            await self.measure()
            await asyncio.sleep(1.0)

    async def measure(self) -> None:
        await self._check_head()
        head, base = self.head_seq(), self.archived
        self.lag_rows = max(0, head - base)
        if self.lag_rows == 0:
            self.lag_seconds = 0.0
        else:
            if self._oldest[0] != base + 1:
                self._oldest = (base + 1, await self._guarded(self._row_at, base + 1))
            at = self._oldest[1]
            self.lag_seconds = 0.0 if at is None else max(0.0, time.time() - at)
        self.note(self.reason())

    async def _check_head(self) -> None:
        """The archived head must be a row of this ledger, with that hash: otherwise the
        archive holds another chain than this ledger's (a ledger put back from an older
        copy, or another table's), and nothing here is safe off the board."""
        answer = self.answer
        if answer is None or answer.seq == 0 or (answer.seq, answer.hash) == self._checked:
            return
        if answer.seq > self.head_seq():
            self.mismatch = (
                f"the archive holds rows up to {answer.seq}, beyond this ledger's head "
                f"{self.head_seq()}: this ledger is not the one archived"
            )
            return
        found = await self._guarded(self._row_hash, answer.seq)
        if found is None:
            return  # unread: tried again at the next measure
        self._checked = (answer.seq, answer.hash)
        self.mismatch = (
            ""
            if found == answer.hash
            else f"the archive's row {answer.seq} is not this ledger's row {answer.seq}: this "
            "ledger is not the one archived"
        )

    def reason(self) -> str:
        """Why the table is degraded by its archive ("" when it is not)."""
        if self.mismatch:
            return f"{self.mismatch} (compare them: docs/archive.md, \"Restoring a table\")"
        answer = self.answer
        if answer is not None and answer.status == "refused":
            return (
                f"the archive refuses this table's rows ({answer.code}: {answer.reason}); rows "
                f"after {answer.seq} are only on this board: compare the ledger with the archive "
                "(docs/archive.md)"
            )
        if self.too_large is not None:
            return f"ledger row {self.too_large} is too large to archive: it stays on this board"
        if self.lag_rows > self.max_lag_rows or self.lag_seconds > self.max_lag_s:
            return (
                f"the archive is {self.lag_rows} rows ({self.lag_seconds:.0f} s) behind "
                f"(over [archive] max_lag_rows {self.max_lag_rows} or max_lag_s "
                f"{self.max_lag_s:g}): those rows are only on this board"
            )
        return ""

    def status(self) -> dict[str, Any]:
        """The ``archive`` key of ``progressivectl status`` (docs/archive.md)."""
        answer = self.answer
        return {
            "archive": None if answer is None else answer.archive,
            "heard": answer is not None,
            "archived_seq": self.archived,
            "archived_hash": None if answer is None else answer.hash,
            "head_seq": self.head_seq(),
            "lag_rows": self.lag_rows,
            "lag_seconds": round(self.lag_seconds, 3),
            "max_lag_rows": self.max_lag_rows,
            "max_lag_s": self.max_lag_s,
            "sent_seq": self.sent,
            "answer": None if answer is None else answer.status,
            "refused": None
            if answer is None or answer.status != "refused"
            else {"code": answer.code, "reason": answer.reason},
            "mismatch": self.mismatch or None,
            "healthy": not self.reason(),
        }

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            self._pool.submit(conn.close)
        self._pool.shutdown(wait=True)
