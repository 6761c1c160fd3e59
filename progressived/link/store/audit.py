"""``ledger verify`` on a link ledger: the replay of the book, its snapshots, the identity.

:func:`progressived.ledger.verify.verify` runs its usual checks (chain, rows against
postings, balances, meta's head, witnessed heads, every snapshot naming its row's hash, the
latest snapshot's balances against the postings) on any ledger and calls these for a
ledger whose ``meta`` says ``ledger_kind = link``. Read-only, configuration-free: the
parameters come from the ledger's own ``link_created`` and ``parameter_changed`` rows.
As the table ledger's ``--deep`` replay does for its snapshots, every link snapshot must be
exactly the book replayed up to its row (:func:`progressived.link.core.snapshot.dumps` of it,
byte for byte), so opening cannot be fed a forged one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from progressived.ledger import verify as ledger_verify
from progressived.ledger.checks import REPLAY, SNAPSHOT_STATE, Finding
from progressived.ledger.verify import LedgerKind, VerifyReport
from progressived.link.core import journal, snapshot
from progressived.link.core import params as lp
from progressived.link.core.state import BookState


def is_link(meta: Mapping[str, object]) -> bool:
    """A link ledger (a table ledger has no ``ledger_kind``)."""
    return meta.get("ledger_kind", "table") == journal.LEDGER_KIND


def rebuild(conn: sqlite3.Connection, head: int) -> journal.Replay:
    """The book replayed from rows 1..``head`` (mismatches ignored: see :func:`replay`)."""
    replay = journal.Replay()
    for kind, data in conn.execute(
        "SELECT kind, data FROM journal WHERE seq <= ? ORDER BY seq", (head,)
    ):
        try:
            replay.row(str(kind), json.loads(data))
        except ValueError:
            continue
    return replay


def replay(
    conn: sqlite3.Connection, head: int, snapshots: Sequence[int], limit: int
) -> list[Finding]:
    """Every row through the book: each stored result and postings must come back, and
    each snapshot (``snapshots``: their rows, ascending) must be the book at its row."""
    found: list[Finding] = []
    book = journal.Replay()
    due = iter([s for s in snapshots if s <= head])
    next_snapshot = next(due, None)
    for seq, kind, data in conn.execute(
        "SELECT seq, kind, data FROM journal WHERE seq <= ? ORDER BY seq", (head,)
    ):
        if len(found) >= limit:
            break
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = None  # rows() reports that the data is not JSON
        if parsed is not None:
            wrong = book.row(str(kind), parsed)
            if wrong is not None:
                found.append((int(seq), REPLAY, wrong))
        while next_snapshot is not None and next_snapshot <= seq:
            if next_snapshot == seq:
                wrong = compare_snapshot(conn, seq, book)
                if wrong is not None:
                    found.append((seq, SNAPSHOT_STATE, wrong))
            next_snapshot = next(due, None)
    if head and book.params is None:
        found.append((None, REPLAY, "no link_created row: not a link ledger's journal"))
    return found


def compare_snapshot(conn: sqlite3.Connection, seq: int, book: journal.Replay) -> str | None:
    """What is wrong with the snapshot at row ``seq`` given the book replayed up to it."""
    (text,) = conn.execute("SELECT state FROM snapshots WHERE seq = ?", (seq,)).fetchone()
    text = str(text)
    try:
        expected = snapshot.dumps(book.recorded or {}, book.state)
    except snapshot.SnapshotError as exc:
        return f"the book replayed up to this row cannot be written as a snapshot: {exc}"
    if text == expected:
        return None
    try:
        saved = snapshot.parse(text)
        snapshot.from_dict(saved)
    except snapshot.SnapshotError as exc:
        return f"the snapshot at this row cannot be read: {exc}"
    replayed = json.loads(expected)
    parts = sorted(k for k in set(saved) | set(replayed) if saved.get(k) != replayed.get(k))
    which = ", ".join(parts) if parts else "its JSON text, not canonical"
    return f"the snapshot at this row differs from the book replayed up to it ({which})"


def identity_gaps(balances: Mapping[str, int], meters: list[str]) -> dict[str, int]:
    """Per linked meter, :func:`progressived.link.core.params.identity_gap` (0 when it holds)."""
    return {m: lp.identity_gap(balances, m) for m in meters}


class _LinkKind:
    """:class:`progressived.ledger.verify.LedgerKind` for a link ledger."""

    def snapshot_balances(self, text: str) -> Mapping[str, int]:
        return snapshot.balances_of(text)

    def replay(
        self, conn: sqlite3.Connection, head: int, snapshots: Sequence[int], limit: int
    ) -> list[Finding]:
        return replay(conn, head, snapshots, limit)

    def identity_gaps(self, balances: Mapping[str, int], meters: list[str]) -> dict[str, int]:
        return identity_gaps(balances, meters)


# What ``ledger verify`` is given to check link ledgers as well as tables' (by meta's
# ``ledger_kind``).
KINDS: Mapping[str, LedgerKind] = {journal.LEDGER_KIND: _LinkKind()}


def verify(path: Path | str, **options: Any) -> VerifyReport:
    """``ledger verify`` of a link's ledger or a table's: :func:`progressived.ledger.verify.verify`
    with the link's checks (``options`` are its keywords)."""
    return ledger_verify.verify(path, kinds=KINDS, **options)


def state_of(conn: sqlite3.Connection, head: int) -> tuple[lp.LinkParams | None, BookState]:
    replay = rebuild(conn, head)
    return replay.params, replay.state
