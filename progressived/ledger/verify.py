"""``ledger verify``: check a ledger from its own rows, read-only, while the daemon runs.

What is checked (all inside one read transaction, so a concurrent writer is neither
blocked nor able to make the checks see a half-written state):

* ``PRAGMA integrity_check``;
* the hash chain: rows numbered 1..N without gaps, each ``prev_hash`` equal to the hash of
  the row before, each ``hash`` equal to SHA-256 of the row's canonical content (chain.py);
* every money event's postings sum to zero and the ``postings`` table holds exactly the
  postings in the (hashed) row;
* the ``balances`` table equals the replay of all postings, and the accounting identity
  holds for every meter;
* every snapshot names a row's hash and (with ``replay``) equals the engine state replayed
  from the events up to that row, so recovery cannot be fed a forged snapshot;
* the idempotency table and the head recorded in ``meta`` agree with the journal.

Problems are reported in journal order, so the first one names the first bad row.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any

from progressived.engine import accounts
from progressived.engine.core import evolve
from progressived.engine.events import event_from_dict
from progressived.engine.state import TableState
from progressived.ledger import chain, snapshot
from progressived.ledger.errors import LedgerError
from progressived.ledger.readonly import connect_readonly
from progressived.ledger.rows import nonzero


@dataclass(frozen=True, slots=True)
class Problem:
    """One failed check; ``seq`` is the journal row it concerns (``None``: the whole file)."""

    seq: int | None
    message: str

    def __str__(self) -> str:
        return self.message if self.seq is None else f"row {self.seq}: {self.message}"


@dataclass
class VerifyReport:
    rows: int = 0
    head_seq: int = 0
    head_hash: str = chain.GENESIS
    table_id: str = ""
    snapshots: int = 0
    balances: dict[str, int] = field(default_factory=dict)
    identity_gap: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first_bad_seq(self) -> int | None:
        for problem in self.problems:
            if problem.seq is not None:
                return problem.seq
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "rows": self.rows,
            "head_seq": self.head_seq,
            "head_hash": self.head_hash,
            "table_id": self.table_id,
            "snapshots": self.snapshots,
            "identity_gap_units": self.identity_gap,
            "first_bad_seq": self.first_bad_seq,
            "problems": [{"seq": p.seq, "message": p.message} for p in self.problems],
        }


class _TooMany(Exception):
    pass


def meter_ids(balances: dict[str, int]) -> list[str]:
    """The meters a ledger holds, from its account names (no configuration needed)."""
    prefixes = ("meter:", "seed_funding:")
    return sorted({a.split(":", 1)[1] for a in balances if a.startswith(prefixes)})


def verify(
    path: Path | str, *, replay: bool = True, integrity: bool = True, max_problems: int = 50
) -> VerifyReport:
    """Check the ledger at ``path``; raises :class:`LedgerError` if it cannot be read."""
    conn = connect_readonly(path)
    report = VerifyReport()
    try:
        conn.execute("BEGIN")
        _run(conn, report, path=path, replay=replay, integrity=integrity, max_problems=max_problems)
    except _TooMany:
        pass
    except sqlite3.Error as exc:
        raise LedgerError(f"{path}: cannot read the ledger: {exc}") from None
    finally:
        conn.close()
    report.problems.sort(key=lambda p: (p.seq is None, p.seq or 0))
    return report


def _postings_by_seq(conn: sqlite3.Connection) -> Iterator[tuple[int, list[tuple[str, int]]]]:
    current: int | None = None
    legs: list[tuple[str, int]] = []
    expected_leg = 0
    for seq, leg, account, units in conn.execute(
        "SELECT seq, leg, account, units FROM postings ORDER BY seq, leg"
    ):
        if seq != current:
            if current is not None:
                yield current, legs
            current, legs, expected_leg = seq, [], 0
        if leg != expected_leg:
            legs.append(("<missing leg>", 0))
        legs.append((account, units))
        expected_leg = leg + 1
    if current is not None:
        yield current, legs


def _run(
    conn: sqlite3.Connection,
    report: VerifyReport,
    *,
    path: Path | str,
    replay: bool,
    integrity: bool,
    max_problems: int,
) -> None:
    def problem(seq: int | None, message: str) -> None:
        report.problems.append(Problem(seq, message))
        if len(report.problems) >= max_problems:
            raise _TooMany

    if integrity:
        result = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
        if result != ["ok"]:
            problem(None, "integrity_check: " + "; ".join(result[:5]))
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    report.table_id = str(meta.get("table_id", ""))
    snapshots = {
        int(s): (str(h), str(t))
        for s, h, t in conn.execute("SELECT seq, hash, state FROM snapshots ORDER BY seq")
    }
    report.snapshots = len(snapshots)
    if not replay:
        _fast_pass(conn, report, problem, snapshots, path)
        _tail_checks(conn, report, problem, meta, snapshots, _sql_balances(conn))
        return
    postings = _postings_by_seq(conn)
    pending = next(postings, None)
    balances: dict[str, int] = {}
    state = TableState()
    expected_seq = 1
    expected_prev = chain.GENESIS
    for row in conn.execute(
        "SELECT seq, at, table_id, round, seat, kind, category, actor, idem_key, data, "
        "prev_hash, hash FROM journal ORDER BY seq"
    ):
        seq, at, table_id, rnd, seat, kind, category, actor, idem, data, prev_hash, row_hash = row
        report.rows += 1
        if seq != expected_seq:
            problem(seq, f"expected row {expected_seq} here: rows were deleted or inserted")
        if prev_hash != expected_prev:
            problem(
                seq,
                "prev_hash is not the hash of the row before it (rows deleted, "
                "inserted or reordered)",
            )
        text = chain.content(seq, at, table_id, rnd, seat, kind, category, actor, idem, data)
        if chain.link(prev_hash, text) != row_hash:
            problem(seq, "hash does not match the row's content (the row was edited)")
        if table_id != report.table_id:
            problem(seq, f"table {table_id!r} is not the ledger's table {report.table_id!r}")
        while pending is not None and pending[0] < seq:
            problem(pending[0], "postings for a journal row that does not exist")
            pending = next(postings, None)
        stored: list[tuple[str, int]] = []
        if pending is not None and pending[0] == seq:
            stored = pending[1]
            pending = next(postings, None)
        try:
            payload = json.loads(data)
        except ValueError:
            problem(seq, "data is not JSON")
            payload = {}
        if category == "engine":
            try:
                event = event_from_dict(payload)
            except (KeyError, TypeError, ValueError) as exc:
                problem(seq, f"data is not a {kind} event: {exc!r}")
            else:
                if (event.kind, event.round, event.seat) != (kind, rnd, seat):
                    problem(seq, "kind, round or seat differ from the event's data")
                legs = [(p.account, p.units) for p in event.postings]
                if sum(u for _, u in legs):
                    problem(seq, f"postings do not balance (sum {sum(u for _, u in legs)})")
                if legs != stored:
                    problem(seq, "the postings table differs from the row's postings")
                for account, units in legs:
                    balances[account] = balances.get(account, 0) + units
                if replay:
                    state = evolve(state, event)
        elif stored:
            problem(seq, f"a {category} row has postings")
        snap = snapshots.get(seq)
        if snap is not None:
            if snap[0] != row_hash:
                problem(seq, "the snapshot at this row names another hash")
            elif replay and snapshot.loads(snap[1]) != state:
                problem(seq, "the snapshot at this row differs from the replayed state")
        expected_seq = seq + 1
        expected_prev = row_hash
    while pending is not None:
        problem(pending[0], "postings for a journal row that does not exist")
        pending = next(postings, None)
    report.head_seq, report.head_hash = expected_seq - 1, expected_prev
    _tail_checks(conn, report, problem, meta, snapshots, balances)


Report = Callable[[int | None, str], None]

# The fast pass's checks of the rows' JSON against the postings table, done by SQLite in
# one scan: the postings each engine row's JSON carries must be, leg by leg, the postings
# table's rows for it (both rendered as minified JSON), and kind, round and seat must match.
_ROWS_VS_POSTINGS = """
SELECT j.seq, j.category,
  CASE WHEN NOT json_valid(j.data) THEN 'data is not JSON'
       WHEN j.category != 'engine' THEN
         CASE WHEN p.legs IS NOT NULL THEN 'a ' || j.category || ' row has postings' END
       WHEN json_extract(j.data, '$.kind') IS NOT j.kind
         OR json_extract(j.data, '$.round') IS NOT j.round
         OR json_extract(j.data, '$.seat') IS NOT j.seat
         THEN 'kind, round or seat differ from the event''s data'
       WHEN coalesce(p.legs, '[]') IS NOT coalesce(json_extract(j.data, '$.postings'), '[]')
         THEN 'the postings table differs from the row''s postings'
  END AS problem
FROM journal j LEFT JOIN (
  SELECT seq, json_group_array(json_array(account, units)) AS legs
  FROM (SELECT seq, account, units FROM postings ORDER BY seq, leg) GROUP BY seq
) p ON p.seq = j.seq
WHERE problem IS NOT NULL"""
_UNBALANCED = "SELECT seq, sum(units) FROM postings GROUP BY seq HAVING sum(units) != 0"
_ORPHAN_POSTINGS = """
SELECT DISTINCT q.seq FROM postings q LEFT JOIN journal j ON j.seq = q.seq WHERE j.seq IS NULL"""


def _sql_checks(path: Path | str, head: int) -> list[tuple[int | None, str]]:
    """The rows' JSON against the postings table, on a connection of its own (SQLite
    releases the GIL, so this runs beside the hash chain on a second core)."""
    found: list[tuple[int | None, str]] = []
    conn = connect_readonly(path)
    try:
        conn.execute("BEGIN")
        current = conn.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0]
        if current != head:
            found.append((None, "the ledger grew during the check: run it again"))
        for seq, _category, message in conn.execute(_ROWS_VS_POSTINGS):
            found.append((int(seq), str(message)))
        for seq, total in conn.execute(_UNBALANCED):
            found.append((int(seq), f"postings do not balance (sum {total})"))
        for (seq,) in conn.execute(_ORPHAN_POSTINGS):
            found.append((int(seq), "postings for a journal row that does not exist"))
    except sqlite3.OperationalError as exc:  # e.g. malformed JSON past a dropped CHECK
        found.append((None, f"the rows' data cannot be checked: {exc}"))
    finally:
        conn.close()
    return found


def _fast_pass(
    conn: sqlite3.Connection,
    report: VerifyReport,
    problem: Report,
    snapshots: Mapping[int, Any],
    path: Path | str,
) -> None:
    """The hash chain in Python (one SHA-256 a row) while SQLite checks the rows' JSON
    against the postings on a second thread. It does not rebuild the engine state
    (``--deep`` does)."""
    head = int(conn.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-sql") as pool:
        sql = pool.submit(_sql_checks, path, head)
        _chain_pass(conn, report, problem, snapshots)
        for seq, message in sql.result():
            problem(seq, message)


# The canonical row text of chain.content, built by SQLite: ``prev_hash|content``.
_CHAIN_ROWS = """
SELECT seq, table_id, prev_hash, hash,
  prev_hash || '|' || seq || '|' || at || '|' || table_id || '|' || coalesce(round, '') || '|' ||
  seat || '|' || kind || '|' || category || '|' || actor || '|' || coalesce(idem_key, '') ||
  '|' || data
FROM journal ORDER BY seq"""


def _chain_pass(
    conn: sqlite3.Connection, report: VerifyReport, problem: Report, snapshots: Mapping[int, Any]
) -> None:
    """Every row's hash recomputed (``chain.link``'s SHA-256 over the same text)."""
    expected_seq, expected_prev = 1, chain.GENESIS
    table = report.table_id
    rows = 0
    for seq, table_id, prev_hash, row_hash, text in conn.execute(_CHAIN_ROWS):
        rows += 1
        if seq != expected_seq:
            problem(seq, f"expected row {expected_seq} here: rows were deleted or inserted")
        if prev_hash != expected_prev:
            problem(
                seq,
                "prev_hash is not the hash of the row before it (rows deleted, "
                "inserted or reordered)",
            )
        if sha256(text.encode()).hexdigest() != row_hash:
            problem(seq, "hash does not match the row's content (the row was edited)")
        if table_id != table:
            problem(seq, f"table {table_id!r} is not the ledger's table {table!r}")
        if seq in snapshots and snapshots[seq][0] != row_hash:
            problem(seq, "the snapshot at this row names another hash")
        expected_seq, expected_prev = seq + 1, row_hash
    report.rows += rows
    report.head_seq, report.head_hash = expected_seq - 1, expected_prev


def _sql_balances(conn: sqlite3.Connection) -> dict[str, int]:
    """Every account's balance as the replay (sum) of the postings table."""
    return {
        str(a): int(u)
        for a, u in conn.execute("SELECT account, sum(units) FROM postings GROUP BY account")
    }


def _tail_checks(
    conn: sqlite3.Connection,
    report: VerifyReport,
    problem: Report,
    meta: Mapping[str, Any],
    snapshots: Mapping[int, Any],
    balances: dict[str, int],
) -> None:
    """The head, the balances table, the identity and the idempotency keys."""
    head, expected_prev = report.head_seq, report.head_hash
    for seq in sorted(s for s in snapshots if s > head):
        problem(seq, "a snapshot after the last journal row (rows were deleted)")
    if str(meta.get("head_seq")) != str(head) or meta.get("head_hash") != expected_prev:
        problem(
            head or None,
            f"meta records head row {meta.get('head_seq')} but the journal ends at row {head} "
            "(rows were deleted or appended outside the ledger)",
        )
    table = {str(a): (int(u), int(s)) for a, u, s in conn.execute("SELECT * FROM balances")}
    for account in sorted(set(table) | set(balances)):
        have = table.get(account, (0, None))
        if have[0] != balances.get(account, 0):
            problem(
                have[1],
                f"balance of {account} is {have[0]}, the postings add up to "
                f"{balances.get(account, 0)}",
            )
    report.balances = nonzero(balances)
    report.identity_gap = accounts.identity_gap(balances, meter_ids(balances))
    if report.identity_gap:
        problem(None, f"the accounting identity is off by {report.identity_gap} units")
    for (key,) in conn.execute(
        "SELECT i.key FROM idempotency i LEFT JOIN journal j ON j.seq = i.first_seq "
        "WHERE i.last_seq > ? OR (i.last_seq >= i.first_seq AND j.idem_key IS NOT i.key)",
        (head,),
    ):
        problem(None, f"idempotency key {key!r} does not match the journal")
    for (seq,) in conn.execute(
        "SELECT j.seq FROM journal j LEFT JOIN idempotency i ON i.key = j.idem_key "
        "WHERE j.idem_key IS NOT NULL AND i.first_seq IS NOT j.seq ORDER BY j.seq"
    ):
        problem(int(seq), "its idempotency key is not recorded")
