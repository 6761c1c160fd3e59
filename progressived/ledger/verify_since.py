"""``ledger verify --since-verified``: check only what was appended after the verified head.

Reads the head a previous check found sound (``LEDGER.verified``, see heads.py) and checks,
in one read transaction, with every SQL restricted to the rows after that head:

* the recorded head row still has the recorded hash, and the chain walks intact from it
  (and from every witnessed ``--head``) to the ledger's head;
* each later row's table, its data against the postings table, that its postings balance,
  that no posting belongs to a row that does not exist;
* the balances table against the recorded balances plus the later postings, and the
  accounting identity on the result;
* the snapshots after the head and the latest snapshot name their row's hash; the head in
  ``meta``; the idempotency keys of the later rows.

What it cannot see (``--full`` can): a row at or before the verified head edited (its data,
its postings, or its own hash recomputed) while the recorded head row's hash is left as it
was, since those rows are not read; damage that only ``PRAGMA integrity_check`` finds (a
whole-file scan, not run here). A consistent rewrite through the verified head changes that
row's hash and is caught; one made together with a forged sidecar is caught only by
``--head`` against a head recorded elsewhere. docs/ledger.md says the same for auditors.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path

from progressived.engine import accounts
from progressived.ledger import chain, checks
from progressived.ledger.errors import LedgerError
from progressived.ledger.heads import HEAD_ORDER, VerifiedHead, WitnessedHead, witnessed
from progressived.ledger.rows import nonzero
from progressived.ledger.verify import Problem, VerifyReport, meter_ids

MODE = "since-verified"
_TAIL = 10  # the order of the whole-ledger findings (as verify's tail checks)

_UNBALANCED = """
SELECT seq, sum(units) FROM postings WHERE seq > :after AND seq <= :head GROUP BY seq
HAVING sum(units) != 0 ORDER BY seq LIMIT :limit"""
_ORPHANS = """
SELECT DISTINCT q.seq FROM postings q LEFT JOIN journal j ON j.seq = q.seq
WHERE q.seq > :after AND j.seq IS NULL ORDER BY q.seq LIMIT :limit"""
_SUMS = "SELECT account, sum(units) FROM postings WHERE seq > :after GROUP BY account"
_SNAPSHOTS = """
SELECT s.seq, j.hash IS s.hash FROM snapshots s LEFT JOIN journal j ON j.seq = s.seq
WHERE s.seq > :after OR s.seq = (SELECT max(seq) FROM snapshots) ORDER BY s.seq"""
_IDEM_KEYS = """
SELECT i.key FROM idempotency i LEFT JOIN journal j ON j.seq = i.first_seq
WHERE i.last_seq > :head OR (i.first_seq > :after AND i.last_seq >= i.first_seq
  AND j.idem_key IS NOT i.key)"""
_IDEM_ROWS = """
SELECT j.seq FROM journal j LEFT JOIN idempotency i ON i.key = j.idem_key
WHERE j.seq > :after AND j.idem_key IS NOT NULL AND i.first_seq IS NOT j.seq ORDER BY j.seq"""


def verify_since(
    path: Path | str,
    verified: VerifiedHead,
    *,
    heads: Sequence[WitnessedHead] = (),
    max_problems: int = 50,
) -> VerifyReport:
    """Check the rows after ``verified``; raises :class:`LedgerError` if the file cannot be
    read. ``report.rows`` counts the rows walked."""
    report = VerifyReport(mode=MODE, checked_from=verified.head.seq)
    found: list[checks.Finding] = []
    conn = checks.open_read(path)  # read-only, inside one read transaction
    try:
        _check(conn, path, report, found, verified, heads, max_problems)
    except sqlite3.Error as exc:
        raise LedgerError(f"{path}: cannot read the ledger: {exc}") from None
    finally:
        conn.close()
    found.sort(key=lambda f: (f[0] is None, f[0] or 0, f[1]))
    report.problems = [Problem(seq, message) for seq, _, message in found[:max_problems]]
    return report


def _check(
    conn: sqlite3.Connection,
    path: Path | str,
    report: VerifyReport,
    found: list[checks.Finding],
    verified: VerifiedHead,
    heads: Sequence[WitnessedHead],
    limit: int,
) -> None:
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    report.table_id = table = str(meta.get("table_id", ""))
    report.snapshots = int(conn.execute("SELECT count(*) FROM snapshots").fetchone()[0])
    head = int(conn.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])
    mark = verified.head
    if verified.table_id != table:
        found.append(
            (
                None,
                _TAIL,
                f"the recorded verified head is table {verified.table_id!r}'s, "
                f"not this ledger's {table!r}: run verify --full",
            )
        )
        return
    recorded, matching = _witnesses(conn, verified, heads, head, found)
    if recorded:
        return
    # Walk from the lowest of the recorded head and the witnessed heads that match, so that
    # the chain is seen to run intact through each of them to the ledger's head.
    start = min([mark, *matching], key=lambda h: h.seq)
    report.checked_from = start.seq
    walk = chain.Walk(start.seq, start.hash)
    breaks = walk.breaks(conn.execute(chain.ROWS_SQL, (start.seq, head)))
    for finding in breaks:
        found.append(finding)
        if len(found) >= limit:
            break
    breaks.close()
    report.rows, report.head_seq, report.head_hash = walk.rows, walk.seq, walk.hash
    found.extend(checks.rows(path, table, start.seq, head, limit))
    args = {"after": start.seq, "head": head, "limit": limit}
    _postings_and_snapshots(conn, args, head, found)
    balances = dict(verified.balances)
    for account, units in conn.execute(_SUMS, {"after": mark.seq}):
        balances[str(account)] = balances.get(str(account), 0) + int(units)
    _tail(conn, report, found, meta, balances, args)


def _witnesses(
    conn: sqlite3.Connection,
    verified: VerifiedHead,
    heads: Sequence[WitnessedHead],
    head: int,
    found: list[checks.Finding],
) -> tuple[list[checks.Finding], list[WitnessedHead]]:
    """The recorded verified head checked (its findings: the ledger was rewritten at or
    before it) and the witnessed heads that match (each one that does not is a finding)."""
    mark = verified.head
    recorded = witnessed(conn, [mark], head)
    for seq, _, _ in recorded:
        found.append(
            (
                seq,
                HEAD_ORDER,
                f"the verified head row {mark.seq} no longer has the recorded "
                f"hash {mark.hash} (verified {verified.at}): the ledger was rewritten at or "
                "before that row, or rows were cut off; run verify --full",
            )
        )
    matching = []
    for witness in heads:
        wrong = witnessed(conn, [witness], head)
        found.extend(wrong)
        if not wrong:
            matching.append(witness)
    return recorded, matching


def _postings_and_snapshots(
    conn: sqlite3.Connection, args: Mapping[str, int], head: int, found: list[checks.Finding]
) -> None:
    """The postings and snapshots written after the verified head."""
    for seq, total in conn.execute(_UNBALANCED, args):
        found.append((int(seq), checks.UNBALANCED, f"postings do not balance (sum {total})"))
    for (seq,) in conn.execute(_ORPHANS, args):
        found.append((int(seq), checks.ORPHAN, "postings for a journal row that does not exist"))
    for seq, same in conn.execute(_SNAPSHOTS, args):
        if int(seq) > head:
            found.append(
                (int(seq), _TAIL, "a snapshot after the last journal row (rows were deleted)")
            )
        elif not same:
            found.append(
                (int(seq), checks.SNAPSHOT_HASH, "the snapshot at this row names another hash")
            )


def _tail(
    conn: sqlite3.Connection,
    report: VerifyReport,
    found: list[checks.Finding],
    meta: dict[str, str],
    balances: dict[str, int],
    args: dict[str, int],
) -> None:
    """The head in ``meta``, the balances table, the identity, the later idempotency keys."""
    head = report.head_seq
    if str(meta.get("head_seq")) != str(head) or meta.get("head_hash") != report.head_hash:
        found.append(
            (
                head or None,
                _TAIL,
                f"meta records head row {meta.get('head_seq')} but the "
                f"journal ends at row {head} (rows were deleted or appended outside the ledger)",
            )
        )
    table = {str(a): (int(u), int(s)) for a, u, s in conn.execute("SELECT * FROM balances")}
    for account in sorted(set(table) | set(balances)):
        have = table.get(account, (0, None))
        if have[0] != balances.get(account, 0):
            found.append(
                (
                    have[1],
                    _TAIL,
                    f"balance of {account} is {have[0]}, the verified balances "
                    f"and the later postings add up to {balances.get(account, 0)}",
                )
            )
    report.balances = nonzero(balances)
    report.identity_gap = accounts.identity_gap(balances, meter_ids(balances))
    if report.identity_gap:
        found.append(
            (None, _TAIL, f"the accounting identity is off by {report.identity_gap} units")
        )
    for (key,) in conn.execute(_IDEM_KEYS, args):
        found.append((None, _TAIL, f"idempotency key {key!r} does not match the journal"))
    for (seq,) in conn.execute(_IDEM_ROWS, args):
        found.append((int(seq), _TAIL, "its idempotency key is not recorded"))
