"""``verify`` over a report's period: the rows the report was made from are the rows written.

Two of ``ledger verify``'s checks, restricted to the period's rows ``(before, last]`` and
run with its own code: the hash chain walked from the row before the period
(:class:`progressived.ledger.chain.Walk`: each row's number, ``prev_hash`` and recomputed
hash), and each row's ``postings`` table rows against the postings inside its hashed data
(:func:`progressived.ledger.checks.rows`). A long period's chain is walked by a forked
process, as ``ledger verify`` does, while this one reads the report's figures.

The row before the period and the period's last row are named in the report by number and
hash: the opening row's hash is the previous report's closing one, and ``ledger verify
--head SEQ:HASH`` ties either to the ledger's head (docs/reports.md).
"""

from __future__ import annotations

from pathlib import Path

from progressived.ledger import chain, checks

LIMIT = 20  # problems reported per ledger


def walk(path: Path | str, after: int, after_hash: str, last: int) -> list[str]:
    """Breaks in the chain of rows ``after+1..last`` (each ``row N: what``)."""
    conn = checks.open_read(path)
    found: list[str] = []
    try:
        steps = chain.Walk(after, after_hash)
        breaks = steps.breaks(conn.execute(chain.ROWS_SQL, (after, last)))
        for seq, _, message in breaks:
            found.append(f"row {seq}: {message}")
            if len(found) >= LIMIT:
                break
        breaks.close()
        if not found and steps.seq != last:
            found.append(f"row {steps.seq + 1}: expected here: {chain.GAP_REASON}")
    finally:
        conn.close()
    return found


def postings(path: Path | str, table: str, after: int, last: int) -> list[str]:
    """Rows of ``after+1..last`` whose postings table or table id differ from their data."""
    return [
        message if seq is None else f"row {seq}: {message}"
        for seq, _, message in checks.rows(path, table, after, last, LIMIT)
    ]
