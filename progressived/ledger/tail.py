"""The hash chain's last rows checked in place: what the power-up self-check reads.

Here rather than in the daemon because it reads the journal's columns and recomputes their
chain, which is the ledger's business (docs/ledger.md, "The hash chain").
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from progressived.ledger import chain
from progressived.ledger.readonly import connect_untouched

__all__ = ["ledger_head"]


def ledger_head(path: Path, rows: int = 1000) -> tuple[int, str, int]:
    """Recompute the hash chain over the last ``rows`` rows; returns (head seq, head hash, rows).

    Raises ``ValueError`` naming the first row whose link does not hold. Reads without
    creating a file beside the ledger (``progressived self-check`` run by root must not
    leave root's ``-wal``/``-shm`` for the daemon's user).
    """
    conn = connect_untouched(path)
    try:
        found = conn.execute(
            "SELECT seq, at, table_id, round, seat, kind, category, actor, idem_key, data, "
            "prev_hash, hash FROM journal ORDER BY seq DESC LIMIT ?",
            (rows + 1,),
        ).fetchall()
    except sqlite3.Error as exc:
        raise ValueError(f"ledger unreadable: {exc}") from None
    finally:
        conn.close()
    found.reverse()
    previous: str | None = None
    for index, row in enumerate(found):
        seq, at, table_id, round_no, seat, kind, category, actor, idem, data, prev, digest = row
        if index == 0 and seq == 1 and prev != chain.GENESIS:
            raise ValueError("row 1 does not start the chain")
        if previous is not None and prev != previous:
            raise ValueError(f"row {seq}: prev_hash does not match row {seq - 1}")
        text = chain.content(seq, at, table_id, round_no, seat, kind, category, actor, idem, data)
        if chain.link(prev, text) != digest:
            raise ValueError(f"row {seq}: hash does not match its content")
        previous = digest
    if not found:
        return 0, chain.GENESIS, 0
    return int(found[-1][0]), str(found[-1][-1]), len(found)
