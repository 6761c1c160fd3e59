"""The checks of ``ledger verify`` other than the hash chain, each on its own connection.

Each function opens a read-only connection, reads inside one read transaction and returns
what it found as ``(seq, order, message)`` (``seq`` ``None``: the whole file; ``order``
ranks the checks of one row so that reports list them in a fixed order). SQLite releases
the GIL while it works, so these run on threads beside the hash chain (which is Python
hashing) and use the second core. Each stops after ``limit`` findings.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path

from progressived.engine.core import evolve
from progressived.engine.events import event_from_dict
from progressived.engine.state import TableState
from progressived.ledger import snapshot
from progressived.ledger.readonly import connect_readonly
from progressived.ledger.rows import nonzero

Finding = tuple[int | None, int, str]

# The order of one row's findings (the chain's own checks are 0-2, see chain.Walk).
TABLE, SNAPSHOT_HASH, DATA, UNBALANCED, ORPHAN, REPLAY, SNAPSHOT_STATE = 3, 4, 5, 6, 7, 8, 9
INTEGRITY = -1

# Every row's table and data against the postings table, in one scan: the postings each
# engine row's JSON carries must be, leg by leg, the postings table's rows for it (both
# rendered as minified JSON), and kind, round and seat must match. The WHERE clause is a
# cheap filter (one JSON parse of the row) that lets through every row the CASE could
# fault; the CASE then says what is wrong with those few rows only.
_LEGS = (
    "(SELECT json_group_array(json_array(account, units)) FROM "
    "(SELECT account, units FROM postings q WHERE q.seq = j.seq ORDER BY leg))"
)
_ROWS_TEMPLATE = f"""
SELECT j.seq,
  CASE WHEN j.table_id IS NOT :table THEN j.table_id END,
  CASE WHEN NOT json_valid(j.data) THEN 'data is not JSON'
       WHEN j.category != 'engine' THEN
         CASE WHEN {_LEGS} IS NOT NULL THEN 'a ' || j.category || ' row has postings' END
       WHEN json_extract(j.data, '$.kind') IS NOT j.kind
         OR json_extract(j.data, '$.round') IS NOT j.round
         OR json_extract(j.data, '$.seat') IS NOT j.seat
         THEN 'kind, round or seat differ from the event''s data'
       WHEN coalesce({_LEGS}, '[]') IS NOT coalesce(json_extract(j.data, '$.postings'), '[]')
         THEN 'the postings table differs from the row''s postings'
  END AS problem
FROM journal j
WHERE j.seq > :after AND j.seq <= :head AND {{where}}
ORDER BY j.seq LIMIT :limit"""
# The filter parses each row's JSON once; a row that is not JSON at all (possible only
# past a dropped CHECK) makes it fail, and the check is then run without it (slower).
_FILTER = f"""(j.table_id IS NOT :table OR CASE
  WHEN j.category != 'engine' THEN EXISTS (SELECT 1 FROM postings q WHERE q.seq = j.seq)
  ELSE json_extract(j.data, '$.kind', '$.round', '$.seat', '$.postings') IS NOT
    json_array(j.kind, j.round, j.seat, json(coalesce({_LEGS}, '[]'))) END)"""
_ROWS_FAST = _ROWS_TEMPLATE.replace("{where}", _FILTER)
_ROWS_EXACT = _ROWS_TEMPLATE.replace("{where}", "(j.table_id IS NOT :table OR problem IS NOT NULL)")
_UNBALANCED = """
SELECT seq, sum(units) FROM postings WHERE seq <= :head GROUP BY seq HAVING sum(units) != 0
ORDER BY seq LIMIT :limit"""
_ORPHAN_POSTINGS = """
SELECT DISTINCT q.seq FROM postings q LEFT JOIN journal j ON j.seq = q.seq
WHERE j.seq IS NULL ORDER BY q.seq LIMIT :limit"""
# When the journal holds exactly rows 1..head (the usual case), a posting belongs to no row
# exactly when its seq is outside that range: two index probes instead of a join.
_CONTIGUOUS = (
    "SELECT count(*) = :head AND coalesce(min(seq), 1) = 1 AND coalesce(max(seq), 0) = :head "
    "FROM journal"
)
_ORPHANS_OUTSIDE = """
SELECT DISTINCT seq FROM postings WHERE seq < 1 OR seq > :head ORDER BY seq LIMIT :limit"""
_SNAPSHOT_HASHES = """
SELECT s.seq FROM snapshots s JOIN journal j ON j.seq = s.seq WHERE j.hash IS NOT s.hash
ORDER BY s.seq LIMIT :limit"""


# Each check scans the whole file: mapped, its pages are read without a system call and a
# copy each (SQLite caps the size at its compile-time limit).
MMAP_SIZE = 1 << 31


def open_read(path: Path | str) -> sqlite3.Connection:
    """A read-only connection, memory-mapped, inside a read transaction."""
    conn = connect_readonly(path)
    conn.execute(f"PRAGMA mmap_size = {MMAP_SIZE}")
    conn.execute("BEGIN")
    return conn


def integrity(path: Path | str) -> list[Finding]:
    """``PRAGMA integrity_check`` (b-trees, indexes, NOT NULL and CHECK constraints)."""
    conn = open_read(path)
    try:
        result = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()
    return (
        [] if result == ["ok"] else [(None, INTEGRITY, "integrity_check: " + "; ".join(result[:5]))]
    )


def rows(path: Path | str, table: str, after: int, last: int, limit: int) -> list[Finding]:
    """Rows ``after+1..last``: each row's table, and its data against the postings table."""
    found: list[Finding] = []
    conn = open_read(path)
    args = {"after": after, "head": last, "table": table, "limit": limit}
    try:
        try:
            listed = conn.execute(_ROWS_FAST, args).fetchall()
        except sqlite3.OperationalError:
            listed = conn.execute(_ROWS_EXACT, args).fetchall()
        for seq, table_id, message in listed:
            if table_id is not None:
                found.append(
                    (int(seq), TABLE, f"table {table_id!r} is not the ledger's table {table!r}")
                )
            if message is not None:
                found.append((int(seq), DATA, str(message)))
    except sqlite3.OperationalError as exc:  # e.g. malformed JSON past a dropped CHECK
        found.append((None, DATA, f"the rows' data cannot be checked: {exc}"))
    finally:
        conn.close()
    return found


def postings(path: Path | str, head: int, limit: int) -> list[Finding]:
    """Postings that do not balance or belong to no row; snapshots naming another hash."""
    found: list[Finding] = []
    conn = open_read(path)
    args = {"head": head, "limit": limit}
    try:
        current = conn.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0]
        if current != head:
            found.append((None, DATA, "the ledger grew during the check: run it again"))
        for seq, total in conn.execute(_UNBALANCED, args):
            found.append((int(seq), UNBALANCED, f"postings do not balance (sum {total})"))
        contiguous = conn.execute(_CONTIGUOUS, args).fetchone()[0]
        orphans = _ORPHANS_OUTSIDE if contiguous else _ORPHAN_POSTINGS
        for (seq,) in conn.execute(orphans, args):
            found.append((int(seq), ORPHAN, "postings for a journal row that does not exist"))
        for (seq,) in conn.execute(_SNAPSHOT_HASHES, args):
            found.append((int(seq), SNAPSHOT_HASH, "the snapshot at this row names another hash"))
    finally:
        conn.close()
    return found


def _table_balances(text: str) -> Mapping[str, int]:
    return snapshot.loads(text).balances


def sums_and_snapshot(
    path: Path | str,
    head: int,
    balances_of: Callable[[str], Mapping[str, int]] = _table_balances,
) -> tuple[dict[str, int], list[Finding]]:
    """Every account's balance as the sum of the postings table, and the check of the
    latest snapshot (the one recovery starts from): its balances must be the postings
    summed up to its row, so a forged one is caught without ``--deep`` (which compares
    every snapshot's whole state with a replay). Both sums come from one scan of the
    postings (two scans cost twice: each groups every posting by account).
    ``balances_of`` reads a snapshot's balances (a link ledger's snapshots have their own
    format)."""
    conn = open_read(path)
    try:
        snap = conn.execute(
            "SELECT seq, state FROM snapshots WHERE seq <= ? ORDER BY seq DESC LIMIT 1", (head,)
        ).fetchone()
        seq = 0 if snap is None else int(snap[0])
        rows = conn.execute(
            "SELECT account, sum(units), sum(CASE WHEN seq <= ? THEN units ELSE 0 END) "
            "FROM postings GROUP BY account",
            (seq,),
        ).fetchall()
    finally:
        conn.close()
    balances = {str(a): int(u) for a, u, _ in rows}
    if snap is None:
        return balances, []
    try:
        saved = nonzero(balances_of(str(snap[1])))
    except (KeyError, TypeError, ValueError) as exc:
        return balances, [(seq, SNAPSHOT_STATE, f"the latest snapshot cannot be read: {exc}")]
    posted = nonzero({str(a): int(u) for a, _, u in rows})
    wrong = sorted(a for a in set(saved) | set(posted) if saved.get(a, 0) != posted.get(a, 0))
    if not wrong:
        return balances, []
    return balances, [
        (
            seq,
            SNAPSHOT_STATE,
            "the latest snapshot (recovery starts from it) disagrees with the postings up to "
            f"its row: {', '.join(wrong[:5])}",
        )
    ]


def replay(
    conn: sqlite3.Connection, head: int, snapshots: Mapping[int, str], limit: int
) -> list[Finding]:
    """``--deep``: every engine event through the engine; each snapshot must equal the
    state replayed up to its row (so recovery cannot be fed a forged snapshot)."""
    found: list[Finding] = []
    state = TableState()
    for seq, kind, category, data in conn.execute(
        "SELECT seq, kind, category, data FROM journal WHERE seq <= ? ORDER BY seq",
        (head,),
    ):
        if len(found) >= limit:
            break
        if category == "engine":
            try:
                payload = json.loads(data)
            except ValueError:
                payload = {}  # rows() reports that the data is not JSON
            try:
                event = event_from_dict(payload)
            except (KeyError, TypeError, ValueError) as exc:
                found.append((seq, REPLAY, f"data is not a {kind} event: {exc!r}"))
            else:
                state = evolve(state, event)  # rows() compares kind, round, seat, postings
        text = snapshots.get(seq)
        if text is None:
            continue
        try:
            saved = snapshot.loads(text)
        except snapshot.SnapshotError as exc:
            found.append((seq, SNAPSHOT_STATE, f"the snapshot at this row cannot be read: {exc}"))
            continue
        if saved != state:
            found.append(
                (seq, SNAPSHOT_STATE, "the snapshot at this row differs from the replayed state")
            )
    return found
