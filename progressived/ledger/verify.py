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
* every snapshot names a row's hash, the latest one's balances equal the postings summed
  up to its row, and (with ``replay``) every snapshot equals the engine state replayed
  from the events up to that row, so recovery cannot be fed a forged snapshot;
* the idempotency table and the head recorded in ``meta`` agree with the journal.

Problems are reported in journal order, so the first one names the first bad row.

Micro-benchmark: ``python -m bench.verify`` (against one hashing pass over every row, the
floor; docs/performance.md, "Micro-benchmarks").
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from progressived.engine import accounts
from progressived.ledger import chain, checks
from progressived.ledger.errors import LedgerError
from progressived.ledger.heads import WitnessedHead, witnessed
from progressived.ledger.readonly import connect_readonly
from progressived.ledger.rows import nonzero


class LedgerKind(Protocol):
    """The checks of a ledger kind other than a table's, given to :func:`verify` by its
    caller (the link's: :data:`progressived.link.store.audit.KINDS`). The ledger package
    knows the table's checks only, so it never imports what is built on it."""

    def snapshot_balances(self, text: str) -> Mapping[str, int]:
        """The balances a snapshot of this kind records."""

    def replay(
        self, conn: sqlite3.Connection, head: int, snapshots: Sequence[int], limit: int
    ) -> list[checks.Finding]:
        """Every row through this kind's book; each snapshot compared with the replay."""

    def identity_gaps(self, balances: Mapping[str, int], meters: list[str]) -> dict[str, int]:
        """Per meter, how far the accounting identity is off (0 when it holds)."""


TABLE = "table"  # a table ledger's meta has no ``ledger_kind``


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
    mode: str = "full"  # or "since-verified" (verify_since.py)
    ledger_kind: str = "table"  # or "link" (a link controller's ledger, docs/link.md)
    checked_from: int = 0  # the chain was walked from the row after this one

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
            "mode": self.mode,
            "checked_from_seq": self.checked_from,
            "ledger_kind": self.ledger_kind,
        }


def meter_ids(balances: dict[str, int]) -> list[str]:
    """The meters a ledger holds, from its account names (no configuration needed)."""
    prefixes = ("meter:", "seed_funding:")
    return sorted({a.split(":", 1)[1] for a in balances if a.startswith(prefixes)})


Progress = Callable[[int, int], None]  # (rows done, rows in all)
PROGRESS_EVERY = 20_000  # rows between two progress calls


# A chain this long is split in two: the second half is walked by a forked process (one
# SHA-256 a row is Python work that holds the GIL), the first by this one.
SPLIT_ROWS = 200_000


def verify(
    path: Path | str,
    *,
    replay: bool = True,
    integrity: bool = True,
    max_problems: int = 50,
    progress: Progress | None = None,
    heads: Sequence[WitnessedHead] = (),
    kinds: Mapping[str, LedgerKind] | None = None,
) -> VerifyReport:
    """Check the ledger at ``path``; raises :class:`LedgerError` if it cannot be read.

    The hash chain (``chain.Walk``, the checker recovery uses too) runs here, split with a
    second process on a long ledger; ``PRAGMA integrity_check``, the rows against the
    postings and the per-account sums run meanwhile on threads, each on its own read-only
    connection. All read rows 1..head, the head this call's read transaction saw.
    ``progress(done, total)`` is called now and then while this process walks its part of
    the chain (``progressivectl ledger verify`` draws a bar on a terminal). Each of
    ``heads`` (witnessed elsewhere, heads.py) must be a row of the chain with that hash.
    ``kinds``: the checks of the other ledger kinds this caller can verify, by the
    ``ledger_kind`` in ``meta`` (a ledger of a kind not given is a problem, never checked
    as a table's).
    """
    conn = connect_readonly(path)
    report = VerifyReport()
    found: list[checks.Finding] = []
    try:
        conn.execute("BEGIN")
        _run(
            conn,
            report,
            found,
            path=path,
            replay=replay,
            integrity=integrity,
            limit=max_problems,
            progress=progress,
            kinds=kinds or {},
        )
        found.extend(witnessed(conn, heads, report.head_seq))
    except sqlite3.Error as exc:
        raise LedgerError(f"{path}: cannot read the ledger: {exc}") from None
    finally:
        conn.close()
    found.sort(key=lambda f: (f[0] is None, f[0] or 0, f[1]))
    report.problems = [Problem(seq, message) for seq, _, message in found[:max_problems]]
    return report


_Row = tuple[int, str, str, str]  # chain.ROWS_SQL: seq, prev_hash, hash, canonical text


def _counted(rows: Iterable[_Row], progress: Callable[[int], None] | None) -> Generator[_Row]:
    """``rows``, calling ``progress(rows so far)`` every :data:`PROGRESS_EVERY` rows."""
    if progress is None:
        for row in rows:  # not `yield from`: closing this must not close the cursor
            yield row
        return
    for count, row in enumerate(rows, start=1):
        if count % PROGRESS_EVERY == 0:
            progress(count)
        yield row


def _walk(
    path: Path | str,
    after: int,
    after_hash: str,
    last: int,
    limit: int,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[checks.Finding], int, int, str]:
    """Walk rows ``after+1..last`` of the chain: its breaks, rows read, last row and hash."""
    conn = checks.open_read(path)
    try:
        walk = chain.Walk(after, after_hash)
        found: list[checks.Finding] = []
        rows = _counted(conn.execute(chain.ROWS_SQL, (after, last)), progress)
        breaks = walk.breaks(rows)
        for seq, check, message in breaks:
            found.append((seq, check, message))
            if len(found) >= limit:
                break
        breaks.close()  # settles walk's counters
        rows.close()
    finally:
        conn.close()
    return found, walk.rows, walk.seq, walk.hash


def _meta(
    conn: sqlite3.Connection,
    report: VerifyReport,
    path: Path | str,
    kinds: Mapping[str, LedgerKind],
) -> tuple[dict[str, Any], LedgerKind | None]:
    """The ledger's meta rows, and its kind's checks (None: a table's); the report learns
    the table and the kind. Raises :class:`LedgerError` for a kind not given."""
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    report.table_id = str(meta.get("table_id", ""))
    report.ledger_kind = str(meta.get("ledger_kind", TABLE))
    kind = kinds.get(report.ledger_kind)
    if report.ledger_kind != TABLE and kind is None:
        raise LedgerError(
            f"{path}: a {report.ledger_kind} ledger, which this command does not check"
        )
    return meta, kind


def _split_at(conn: sqlite3.Connection, head: int) -> tuple[Any, ...] | None:
    """The row (seq, hash) where a second process starts walking the chain: half way, on a
    ledger long enough and a machine with a second core; None to walk it in one."""
    if head >= SPLIT_ROWS and (os.cpu_count() or 1) > 1:
        row: tuple[Any, ...] | None = conn.execute(
            "SELECT seq, hash FROM journal WHERE seq >= ? ORDER BY seq LIMIT 1", (head // 2,)
        ).fetchone()
        return row
    return None


def _submit_checks(
    threads: ThreadPoolExecutor,
    path: Path | str,
    table: str,
    head: int,
    limit: int,
    kind: LedgerKind | None,
    integrity: bool,
) -> tuple[list[Future[list[checks.Finding]]], Future[tuple[dict[str, int], list[checks.Finding]]]]:
    """The SQL checks, each on its own connection in a thread: the rows (in two halves),
    the postings, the sums and the snapshot, SQLite's integrity check when asked."""
    middle = head // 2
    jobs = [
        threads.submit(checks.rows, path, table, 0, middle, limit),
        threads.submit(checks.rows, path, table, middle, head, limit),
        threads.submit(checks.postings, path, head, limit),
    ]
    if kind is not None:
        sums = threads.submit(checks.sums_and_snapshot, path, head, kind.snapshot_balances)
    else:
        sums = threads.submit(checks.sums_and_snapshot, path, head)
    if integrity:
        jobs.append(threads.submit(checks.integrity, path))
    return jobs, sums


def _run(
    conn: sqlite3.Connection,
    report: VerifyReport,
    found: list[checks.Finding],
    *,
    path: Path | str,
    replay: bool,
    integrity: bool,
    limit: int,
    progress: Progress | None = None,
    kinds: Mapping[str, LedgerKind],
) -> None:
    meta, kind = _meta(conn, report, path, kinds)
    # seq -> hash; the states are read one at a time by the replay (a link ledger's are
    # megabytes each)
    snapshots = {
        int(s): str(h) for s, h in conn.execute("SELECT seq, hash FROM snapshots ORDER BY seq")
    }
    report.snapshots = len(snapshots)
    head = int(conn.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])
    split = _split_at(conn, head)
    second: Future[tuple[list[checks.Finding], int, int, str]] | None = None
    with (
        ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as procs,
        ThreadPoolExecutor(5, thread_name_prefix="verify-sql") as threads,
    ):
        if split is not None:  # fork before the threads start
            second = procs.submit(_walk, path, int(split[0]), str(split[1]), head, limit)
        jobs, sums = _submit_checks(threads, path, report.table_id, head, limit, kind, integrity)
        # This process walks the first part; the forked one the rest at about the same pace.
        share = 1 if split is None else 2
        tick = None if progress is None else (lambda done: progress(done * share, head))
        if progress is not None:
            progress(0, head)
        mine, rows, last, last_hash = _walk(
            path, 0, chain.GENESIS, head if split is None else int(split[0]), limit, tick
        )
        found.extend(mine)
        if second is not None:
            theirs, more, last, last_hash = second.result()
            found.extend(theirs)
            rows += more
        if kind is not None:  # its book is rebuilt, every result and snapshot compared, always
            found.extend(kind.replay(conn, head, sorted(snapshots), limit))
        elif replay:
            states = {int(s): str(t) for s, t in conn.execute("SELECT seq, state FROM snapshots")}
            found.extend(checks.replay(conn, head, states, limit))
        for job in jobs:
            found.extend(job.result())
        balances, snapshot_findings = sums.result()
        found.extend(snapshot_findings)
    report.rows, report.head_seq, report.head_hash = rows, last, last_hash
    if progress is not None:
        progress(rows, head)

    def problem(seq: int | None, message: str) -> None:
        found.append((seq, 10, message))

    _tail_checks(conn, report, problem, meta, kind, snapshots, balances)


Report = Callable[[int | None, str], None]


def _tail_checks(
    conn: sqlite3.Connection,
    report: VerifyReport,
    problem: Report,
    meta: Mapping[str, Any],
    kind: LedgerKind | None,
    snapshots: Mapping[int, Any],
    balances: dict[str, int],
) -> None:
    """The head, the balances table, the identity and the idempotency keys."""
    head, expected_prev = report.head_seq, report.head_hash
    for seq in sorted(s for s in snapshots if s > head):
        problem(seq, "a snapshot after the last journal row (rows were deleted)")
    if str(meta.get("head_seq")) != str(head):
        problem(
            head or None,
            f"meta records head row {meta.get('head_seq')} but the journal ends at row {head} "
            "(rows were deleted or appended outside the ledger)",
        )
    elif meta.get("head_hash") != expected_prev:
        problem(
            head or None,
            f"meta records head hash {meta.get('head_hash')} but the journal's last row "
            f"{head} has hash {expected_prev} (meta or the last row was changed outside "
            "the ledger)",
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
    if kind is not None:
        gaps = kind.identity_gaps(balances, meter_ids(balances))
        report.identity_gap = sum(abs(gap) for gap in gaps.values())
        for meter, gap in gaps.items():
            if gap:
                problem(None, f"the identity of linked meter {meter} is off by {gap} units")
    else:
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
