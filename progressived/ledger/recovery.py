"""Rebuilding the committed head at open: the latest snapshot plus the rows after it.

The rows after the snapshot are checked with the same chain checker as ``ledger verify``
(:class:`progressived.ledger.chain.Walk`; cheap, at most about ``snapshot_every`` rows), the
snapshot must name its row's hash, and the balances table must equal the replayed state's:
otherwise the ledger refuses to open and points at ``progressivectl ledger verify``, which
checks every row.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from progressived.engine.core import evolve
from progressived.engine.events import event_from_dict
from progressived.engine.state import TableState
from progressived.ledger import chain, snapshot
from progressived.ledger.commit import translate
from progressived.ledger.errors import LedgerError
from progressived.ledger.plan import CommittedHead
from progressived.ledger.rows import nonzero


@dataclass(frozen=True, slots=True)
class Recovery:
    """How the state was rebuilt at open: from which snapshot, replaying how many rows."""

    snapshot_seq: int
    replayed: int
    seconds: float


def recover(conn: sqlite3.Connection, path: Path) -> tuple[CommittedHead, Recovery]:
    """The head as committed in the file (an empty :class:`CommittedHead` for an empty journal)."""
    started = time.perf_counter()
    try:
        last = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
        if last is None:
            return CommittedHead(), Recovery(0, 0, 0.0)
        head_seq, head_hash = int(last[0]), str(last[1])
        balances = {str(a): int(u) for a, u in conn.execute("SELECT account, units FROM balances")}
        snap = conn.execute(
            "SELECT s.seq, s.hash, s.state, j.hash FROM snapshots s "
            "LEFT JOIN journal j ON j.seq = s.seq ORDER BY s.seq DESC LIMIT 1"
        ).fetchone()
        state = TableState()
        since = 0
        if snap is not None:
            if snap[1] != snap[3]:
                raise LedgerError(
                    f"ledger {path}: snapshot at row {snap[0]} does not match the "
                    "journal (run `progressivectl ledger verify`)"
                )
            state = _snapshot_state(path, int(snap[0]), str(snap[2]))
            since = int(snap[0])
        walk = chain.Walk(since, chain.GENESIS if snap is None else str(snap[1]))
        for seq, _check, _message in walk.breaks(conn.execute(chain.ROWS_SQL, (since, head_seq))):
            raise LedgerError(
                f"ledger {path}: the hash chain breaks at row {seq} "
                "(run `progressivectl ledger verify`)"
            )
        replayed = 0
        for (data,) in conn.execute(
            "SELECT data FROM journal WHERE seq > ? AND seq <= ? AND category = 'engine' "
            "ORDER BY seq",
            (since, head_seq),
        ):
            state = evolve(state, event_from_dict(json.loads(data)))
            replayed += 1
    except sqlite3.Error as exc:
        raise translate(exc, path) from None
    if nonzero(state.balances) != nonzero(balances):
        raise LedgerError(_disagreement(conn, path, snap, head_seq))
    head = CommittedHead(head_seq, head_hash, balances, state, head_seq - since)
    return head, Recovery(since, replayed, time.perf_counter() - started)


def _snapshot_state(path: Path, seq: int, text: str) -> TableState:
    """The state of the snapshot recovery starts from; one that cannot be read (a value of
    the wrong type, an unknown key: docs/ledger.md, "Snapshots") stops the open."""
    try:
        return snapshot.loads(text)
    except snapshot.SnapshotError as exc:
        raise LedgerError(
            f"ledger {path}: the snapshot at row {seq} cannot be read ({exc}): run "
            "`progressivectl ledger verify --deep`"
        ) from None


def posted(conn: sqlite3.Connection, upto: int) -> dict[str, int]:
    """Every account's balance as the sum of the postings of rows 1..``upto`` (nonzero)."""
    return nonzero(
        {
            str(a): int(u)
            for a, u in conn.execute(
                "SELECT account, sum(units) FROM postings WHERE seq <= ? GROUP BY account",
                (upto,),
            )
        }
    )


def _disagreement(
    conn: sqlite3.Connection, path: Path, snap: tuple[Any, ...] | None, head_seq: int
) -> str:
    """Why the replayed state and the balances table differ: name the part at fault."""
    try:
        if snap is not None:
            saved = snapshot.loads(snap[2]).balances
            if nonzero(saved) != posted(conn, int(snap[0])):
                return (
                    f"ledger {path}: the snapshot at row {snap[0]} (the one recovery starts "
                    "from) disagrees with the postings up to that row: run "
                    "`progressivectl ledger verify --deep`"
                )
        table_ok = posted(conn, head_seq) == nonzero(
            {str(a): int(u) for a, u in conn.execute("SELECT account, units FROM balances")}
        )
    except sqlite3.Error as exc:
        raise translate(exc, path) from None
    if table_ok:
        return (
            f"ledger {path}: the state replayed from the snapshot at row "
            f"{0 if snap is None else snap[0]} disagrees with the balances: run "
            "`progressivectl ledger verify --deep`"
        )
    return (
        f"ledger {path}: the balances table differs from the sum of the postings "
        "(run `progressivectl ledger verify`)"
    )
