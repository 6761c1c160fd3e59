"""One ledger read for a report: its period's rows, recorded edges, flows, listed rows and
the period's own verify, all inside one consistent read.

The figures are read on this process's read transaction; meanwhile the postings check runs
on a thread (SQLite, without the GIL) and, on a long period, the hash chain walk in a forked
process (Python hashing), each on its own connection, as ``ledger verify`` splits its work
between the two cores. All read rows ``before+1..last`` only, rows a writer can no longer
change, so a report can be made while the daemon or the link controller writes.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from progressived.ledger import snapshot
from progressived.ledger.errors import LedgerError, LedgerMismatch, LedgerMissing
from progressived.ledger.readonly import connect_readonly
from progressived.link.core import journal as link_journal
from progressived.link.core import snapshot as link_snapshot
from progressived.report import check
from progressived.report.bounds import BalancesOf, Bounds, bounds, recorded
from progressived.report.flows import Bucket, MeterFlows, flows, members, wagers
from progressived.report.listed import Listed, listed
from progressived.report.period import Period

FORK_ROWS = 200_000  # a period this long has its chain walked by a second process
FINE = timedelta(days=2)  # a period up to this long has its flows timed to the minute


@dataclass(frozen=True)
class LedgerPeriod:
    """What one ledger says about a period."""

    kind: str  # table | link
    id: str  # the table's or the link's id
    location: str  # the file, or the URL without its password
    bounds: Bounds
    opening: dict[str, int]  # recorded balances after bounds.before
    opening_from: str
    closing: dict[str, int]  # recorded balances after bounds.last
    closing_from: str
    flows: dict[str, MeterFlows]
    wagers: dict[str, int]  # a table's under "*", a link's per meter
    listed: Listed
    params_open: dict[str, Any]  # parameters in force at the period's start (flat keys)
    members: dict[tuple[str, str], list[int]]  # a link's: (meter, table) -> [wagered, contributed]
    problems: list[str]  # the period's verify: empty when it passed

    @property
    def verified(self) -> bool:
        return not self.problems


def _table_balances(text: str) -> dict[str, int]:
    return dict(snapshot.loads(text).balances)


def _params(conn: sqlite3.Connection, seq: int, link: bool) -> dict[str, Any]:
    """The flat parameters recorded up to row ``seq`` (creation, then each change)."""
    current: dict[str, Any] = {}
    for kind, text in conn.execute(
        "SELECT kind, data FROM journal WHERE kind IN ('ledger_created', 'link_created', "
        "'parameter_changed') AND seq <= ? ORDER BY seq",
        (max(seq, 1),),
    ):
        data = json.loads(text)
        if kind == "ledger_created":
            current = dict(data.get("parameters") or {})
        elif kind == "link_created":
            current = link_journal.flat({k: v for k, v in data.items() if k != "software"})
        else:
            for key, change in (data.get("changes") or {}).items():
                if isinstance(change, dict) and "new" in change:
                    current[key] = change["new"]
    if link:
        current.pop("meters", None)
    return current


def read(path: Path, location: str, period: Period, bucket: Bucket) -> LedgerPeriod:
    """Read ``period`` from the ledger file at ``path`` (``location``: how it is named)."""
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        raise LedgerMissing(f"{location}: no ledger there (missing or empty file)")
    try:
        conn = connect_readonly(path)
    except LedgerMismatch as exc:
        raise LedgerMismatch(f"{location}: {exc}") from None
    except LedgerError as exc:  # not SQLite at all
        raise LedgerMismatch(f"{exc} (not a ledger)") from None
    try:
        conn.execute("BEGIN")
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        link = meta.get("ledger_kind") == link_journal.LEDGER_KIND
        ident = str(meta.get("link_id") if link else meta.get("table_id", ""))
        edges = bounds(conn, period.start, period.end)
        after, last = edges.before.seq, edges.last.seq
        balances_of: BalancesOf = link_snapshot.balances_of if link else _table_balances
        table = str(meta.get("table_id", ident))
        walked = _walk_in_background(path, edges)  # forked before any thread starts
        with ThreadPoolExecutor(1, thread_name_prefix="report-postings") as thread:
            postings = thread.submit(check.postings, path, table, after, last)
            by_meter = flows(conn, after, last, bucket, fine=period.end - period.start <= FINE)
            opening, opening_from = recorded(conn, after, edges.head.seq, balances_of)
            closing, closing_from = recorded(conn, last, edges.head.seq, balances_of)
            rows = listed(conn, ident, after, last)
            counts = wagers(conn, after, last, link)
            by_member = members(conn, after, last) if link else {}
            params = _params(conn, after, link)
            problems = (walked.result() if walked is not None
                        else check.walk(path, after, edges.before.hash, last))
            problems += postings.result()
    except sqlite3.Error as exc:
        raise LedgerError(f"{location}: cannot read the ledger: {exc}") from None
    finally:
        conn.close()
    return LedgerPeriod(
        "link" if link else "table", ident, location, edges, opening, opening_from,
        closing, closing_from, by_meter, counts, rows, params, by_member, problems,
    )



def _walk_in_background(path: Path, edges: Bounds) -> Future[list[str]] | None:
    """The hash chain of a long period walked by a forked process (Python hashing, a core of
    its own), while this one reads the figures (``None``: a short period, walked here)."""
    if edges.rows < FORK_ROWS or (os.cpu_count() or 1) < 2:
        return None
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    job = pool.submit(check.walk, path, edges.before.seq, edges.before.hash, edges.last.seq)
    pool.shutdown(wait=False)  # the job still runs; the pool ends with it
    return job
