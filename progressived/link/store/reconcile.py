"""``progressivectl link reconcile``: the link's ledger against its tables' ledgers.

Reads every ledger read-only (safe while the link and the tables run). Reports, to the
unit, every way the ledgers disagree (:mod:`progressived.link.core.compare`), every witnessed
head one side recorded that the other side's chain does not pass through (a consistent
rewrite of either ledger's tail), and every ledger that fails its own ``ledger verify``.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from progressived.ledger import chain
from progressived.ledger.errors import LedgerError, LedgerMismatch
from progressived.ledger.readonly import connect_readonly
from progressived.ledger.verify import verify
from progressived.link.core.compare import Difference, LinkSide, Outcome, TableSide, compare
from progressived.link.store import audit

MISSING, WRONG = 3, 4  # exit statuses (docs/operations.md)
PROBLEMS_PER_LEDGER = 5


class Unusable(Exception):
    """A ledger that cannot be reconciled at all; ``status`` is the exit status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Report:
    link: str
    link_db: str
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    outcome: Outcome = field(default_factory=Outcome)

    @property
    def differences(self) -> list[Difference]:
        return self.outcome.differences

    def to_dict(self) -> dict[str, Any]:
        return {
            "link": self.link,
            "link_db": self.link_db,
            "tables": self.tables,
            "contributions": self.outcome.contributions,
            "in_flight": self.outcome.in_flight,
            "differences": [d.to_dict() for d in self.differences],
        }

    def lines(self) -> list[str]:
        out = [str(d) for d in self.differences]
        messages = sum(t["messages"] for t in self.tables.values())
        out.append(
            f"reconcile link {self.link}: {len(self.tables)} table(s), {messages} messages, "
            f"{len(self.outcome.in_flight)} in flight, {len(self.differences)} difference(s)"
        )
        return out


def _open(path: Path, kind: str) -> sqlite3.Connection:
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        raise Unusable(MISSING, f"{path}: no ledger there (missing or empty file)")
    try:
        conn = connect_readonly(path)
    except LedgerMismatch as exc:
        raise Unusable(WRONG, str(exc)) from None
    except LedgerError as exc:
        raise Unusable(WRONG, f"{exc} (not a ledger)") from None
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    have = "link" if audit.is_link(meta) else "table"
    if have != kind:
        conn.close()
        raise Unusable(WRONG, f"{path} is a {have} ledger, not a {kind} ledger")
    conn.execute("BEGIN")
    return conn


def _meta(conn: sqlite3.Connection, key: str) -> str:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return "" if row is None else str(row[0])


def _rows(
    conn: sqlite3.Connection, kinds: tuple[str, ...]
) -> list[tuple[int, str, dict[str, Any]]]:
    marks = ", ".join("?" * len(kinds))
    out = []
    for seq, kind, data in conn.execute(
        f"SELECT seq, kind, data FROM journal WHERE kind IN ({marks}) ORDER BY seq", kinds
    ):
        try:
            parsed = json.loads(data)
        except ValueError:
            continue  # verify reports it
        if isinstance(parsed, dict):
            out.append((int(seq), str(kind), parsed))
    return out


def _has_row(conn: sqlite3.Connection, head: Any) -> str | None:
    """Why the chain does not pass through ``head`` ({"seq", "hash"}), or ``None``."""
    try:
        seq, want = int(head["seq"]), str(head["hash"])
    except (KeyError, TypeError, ValueError):
        return f"the head {head!r} is not a head"
    if seq == 0:
        return None if want == chain.GENESIS else f"head 0:{want} is not the genesis"
    row = conn.execute("SELECT hash FROM journal WHERE seq = ?", (seq,)).fetchone()
    if row is None:
        return f"head {seq}:{want[:16]}...: the ledger has no row {seq}"
    if row[0] != want:
        return f"head {seq}:{want[:16]}...: row {seq} has hash {str(row[0])[:16]}..."
    return None


def _verify(path: Path, name: str, out: Outcome, shown_as: str | None = None) -> None:
    label = shown_as or str(path)
    try:
        report = verify(path, replay=False, kinds=audit.KINDS)
    except LedgerError as exc:
        out.add("ledger-broken", name, None, f"{label}: {exc}", ledger=label)
        return
    for problem in report.problems[:PROBLEMS_PER_LEDGER]:
        out.add("ledger-broken", name, problem.seq, f"{label}: {problem}", ledger=label)
    if len(report.problems) > PROBLEMS_PER_LEDGER:
        more = len(report.problems) - PROBLEMS_PER_LEDGER
        out.add("ledger-broken", name, None, f"{label}: {more} more problems", ledger=label)


def reconcile(link_db: Path, table_dbs: list[Path], *, link_name: str | None = None) -> Report:
    """Compare; raises :class:`Unusable` when a ledger is missing or of the wrong kind.
    ``link_name``: how to name the link ledger in the report (a database's URL, when
    ``link_db`` is the copy read from it)."""
    link_conn = _open(link_db, "link")
    table_conns: list[tuple[Path, sqlite3.Connection]] = []
    try:
        for path in table_dbs:
            table_conns.append((path, _open(path, "table")))
        return _reconcile(link_db, link_conn, table_conns, link_name or str(link_db))
    finally:
        link_conn.close()
        for _, conn in table_conns:
            conn.close()


def _reconcile(
    link_db: Path,
    link_conn: sqlite3.Connection,
    tables: list[tuple[Path, sqlite3.Connection]],
    link_name: str,
) -> Report:
    link_id = _meta(link_conn, "link_id")
    report = Report(link_id, link_name)
    out = report.outcome
    _verify(link_db, link_id, out, link_name)
    head = int(link_conn.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])
    params, state = audit.state_of(link_conn, head)
    sides: dict[str, LinkSide] = {}
    for _seq, kind, data in _rows(link_conn, ("link_applied", "link_refused")):
        mine = sides.setdefault(str(data.get("table")), LinkSide())
        if kind == "link_applied":
            mine.applied[int(data["seq"])] = data
        else:
            mine.refused.add((int(data.get("seq", 0)), str(data.get("code"))))
    for (table, claim_id), claim in state.claims.items():
        sides.setdefault(table, LinkSide()).claims[claim_id] = claim
    for path, conn in tables:
        table_id = _meta(conn, "table_id")
        _verify(path, table_id, out)
        if params is not None and table_id not in params.tables:
            out.add(
                "not-a-member", table_id, None, f"{path}: link {link_id} has no table {table_id}"
            )
        side = TableSide(table_id)
        for seq, kind, data in _rows(conn, ("link_sent", "link_result")):
            if data.get("link") != link_id:
                continue
            which = side.sent if kind == "link_sent" else side.results
            which.setdefault(int(data["seq"]), {**data, "row": seq})
        link_side = sides.get(table_id, LinkSide())
        compare(link_side, side, out)
        _witnesses(link_conn, conn, table_id, link_side, side, out)
        report.tables[table_id] = {
            "db": str(path),
            "messages": len(side.sent),
            "results": len(side.results),
            "applied_at_link": len(link_side.applied),
        }
    return report


def _witnesses(
    link_conn: sqlite3.Connection,
    table_conn: sqlite3.Connection,
    table: str,
    link: LinkSide,
    side: TableSide,
    out: Outcome,
) -> None:
    """Each head one side journaled from the other must be a row of the other's chain."""
    for seq, row in sorted(link.applied.items()):
        why = _has_row(table_conn, row.get("head"))
        if why is not None:
            out.add(
                "witness-table",
                table,
                seq,
                f"the link witnessed the table's {why} "
                "(the table's ledger was rewritten after the link saw it)",
            )
    for seq, result in sorted(side.results.items()):
        head = (
            result.get("result", {}).get("head") if isinstance(result.get("result"), dict) else None
        )
        why = _has_row(link_conn, head)
        if why is not None:
            out.add(
                "witness-link",
                table,
                seq,
                f"the table witnessed the link's {why} "
                "(the link's ledger was rewritten after the table saw it)",
            )
