"""Where a period lies in one ledger, and the balances the ledger records at its edges.

A period is a range of rows, ``(before, last]``: ``before`` is the last row written before
the period began, ``last`` the last one written before it ended (rows' ``at`` never
decrease as ``seq`` grows, so a binary search on ``seq`` finds both in a few dozen reads).

The **recorded** balances at a row are what the ledger itself wrote down about its
balances, not a sum of the rows the report is checking: the ``balances`` table at the head
(the running balances, written in each row's own transaction), otherwise the latest
recovery snapshot at or before the row (the engine's or the link book's own state, tied to
its row by that row's hash) carried forward by the ``postings`` table to the row. The
report's flows are the period's postings, which verify over the period checks against the
hashed rows: a row removed, an amount edited or a balance or snapshot forged shows as a
variance between the two, or as a failed verify.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from progressived.ledger import chain
from progressived.report.period import parse_at


@dataclass(frozen=True, slots=True)
class Edge:
    """A row that bounds a period: its number, hash and time (``seq`` 0: before row 1)."""

    seq: int
    hash: str
    at: str | None


@dataclass(frozen=True, slots=True)
class Bounds:
    before: Edge  # the last row before the period (the opening is the state after it)
    last: Edge  # the period's last row (== before when the period has no row)
    head: Edge  # the ledger's last row when it was read

    @property
    def rows(self) -> int:
        return self.last.seq - self.before.seq


def edge(conn: sqlite3.Connection, seq: int) -> Edge:
    if seq <= 0:
        return Edge(0, chain.GENESIS, None)
    row = conn.execute("SELECT seq, hash, at FROM journal WHERE seq = ?", (seq,)).fetchone()
    if row is None:
        raise sqlite3.DatabaseError(f"row {seq} is missing from the journal")
    return Edge(int(row[0]), str(row[1]), str(row[2]))


def _last_before(conn: sqlite3.Connection, instant: datetime, head: int) -> int:
    """The last row whose ``at`` is before ``instant`` (0: none)."""
    low, high = 0, head
    while low < high:
        middle = (low + high + 1) // 2
        found = conn.execute(
            "SELECT at FROM journal WHERE seq <= ? ORDER BY seq DESC LIMIT 1", (middle,)
        ).fetchone()
        if found is not None and parse_at(str(found[0])) < instant:
            low = middle
        else:
            high = middle - 1
    return low


def bounds(conn: sqlite3.Connection, start: datetime, end: datetime) -> Bounds:
    """The period ``[start, end)`` as rows of the ledger (inside the caller's transaction)."""
    head = int(conn.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])
    before = _last_before(conn, start, head)
    last = max(before, _last_before(conn, end, head))
    return Bounds(edge(conn, before), edge(conn, last), edge(conn, head))


BalancesOf = Callable[[str], Mapping[str, int]]  # a snapshot's text -> its balances


def recorded(
    conn: sqlite3.Connection, seq: int, head: int, balances_of: BalancesOf
) -> tuple[dict[str, int], str]:
    """The balances the ledger records after row ``seq``, and where they were read."""
    if seq == head:
        table = {str(a): int(u) for a, u in conn.execute("SELECT account, units FROM balances")}
        return table, "the balances table (the ledger's head)"
    snap = conn.execute(
        "SELECT seq, state FROM snapshots WHERE seq <= ? ORDER BY seq DESC LIMIT 1", (seq,)
    ).fetchone()
    base: dict[str, int] = {}
    since = 0
    if snap is not None:
        since = int(snap[0])
        base = {str(a): int(u) for a, u in balances_of(str(snap[1])).items()}
    for account, units in conn.execute(
        "SELECT account, sum(units) FROM postings WHERE seq > ? AND seq <= ? GROUP BY account",
        (since, seq),
    ):
        base[str(account)] = base.get(str(account), 0) + int(units)
    where = (
        f"the snapshot at row {since} and the postings of rows {since + 1}..{seq}"
        if snap is not None
        else f"the postings of rows 1..{seq}"
    )
    return base, where
