"""``ledger verify`` on a link ledger: the replay of the book and the identity per meter.

:func:`progressived.ledger.verify.verify` runs its usual checks (chain, rows against
postings, balances, meta's head, witnessed heads) on any ledger and calls these for a
ledger whose ``meta`` says ``ledger_kind = link``. Read-only, configuration-free: the
parameters come from the ledger's own ``link_created`` and ``parameter_changed`` rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping

from progressived.ledger.checks import REPLAY, SNAPSHOT_STATE, Finding
from progressived.link import journal
from progressived.link import params as lp
from progressived.link.state import BookState


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


def replay(conn: sqlite3.Connection, head: int, snapshots: int, limit: int) -> list[Finding]:
    """Every row through the book: each stored result and postings must come back."""
    found: list[Finding] = []
    if snapshots:
        found.append((None, SNAPSHOT_STATE, f"a link ledger keeps no snapshots ({snapshots})"))
    book = journal.Replay()
    for seq, kind, data in conn.execute(
        "SELECT seq, kind, data FROM journal WHERE seq <= ? ORDER BY seq", (head,)
    ):
        if len(found) >= limit:
            break
        try:
            parsed = json.loads(data)
        except ValueError:
            continue  # rows() reports that the data is not JSON
        wrong = book.row(str(kind), parsed)
        if wrong is not None:
            found.append((int(seq), REPLAY, wrong))
    if head and book.params is None:
        found.append((None, REPLAY, "no link_created row: not a link ledger's journal"))
    return found


def identity_gaps(balances: Mapping[str, int], meters: list[str]) -> dict[str, int]:
    """Per linked meter, :func:`progressived.link.params.identity_gap` (0 when it holds)."""
    return {m: lp.identity_gap(balances, m) for m in meters}


def state_of(conn: sqlite3.Connection, head: int) -> tuple[lp.LinkParams | None, BookState]:
    replay = rebuild(conn, head)
    return replay.params, replay.state
