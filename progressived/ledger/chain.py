"""The tamper-evident hash chain over journal rows.

Each row's ``hash`` is SHA-256 (lower-case hex) of the UTF-8 bytes of::

    prev_hash|seq|at|table_id|round|seat|kind|category|actor|idem_key|data

where ``prev_hash`` is the previous row's ``hash`` (64 zeros for row 1), ``round`` and
``idem_key`` are empty when NULL, integers are written in decimal and ``data`` is the
stored JSON text (ASCII only). The text fields other than ``data`` may not contain ``|``,
CR or LF (CHECK constraints enforce it), so the string splits back into its fields one way
only. The format is chosen so that ``sqlite3`` string concatenation and ``sha256sum`` can
recompute it without Python (see docs/ledger.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator, Iterable
from hashlib import sha256

from progressived.storage.sqlite import CHAIN_ROWS_SQL, GENESIS

__all__ = ["FORBIDDEN", "GENESIS", "ROWS_SQL", "Walk", "clean", "content", "link"]
FORBIDDEN = ("|", "\n", "\r")


def clean(field: str, value: str) -> str:
    """Return ``value`` if it can be hashed unambiguously, else raise ``ValueError``."""
    if "|" in value or "\n" in value or "\r" in value:  # FORBIDDEN, unrolled: hot path
        raise ValueError(f"{field} may not contain '|', CR or LF: {value!r}")
    return value


def content(
    seq: int,
    at: str,
    table_id: str,
    round_no: int | None,
    seat: int,
    kind: str,
    category: str,
    actor: str,
    idem_key: str | None,
    data: str,
) -> str:
    """The canonical text of one row (everything the hash covers except ``prev_hash``)."""
    return "|".join(
        (
            str(seq),
            at,
            table_id,
            "" if round_no is None else str(round_no),
            str(seat),
            kind,
            category,
            actor,
            "" if idem_key is None else idem_key,
            data,
        )
    )


def link(prev_hash: str, row_content: str) -> str:
    """The hash of a row: SHA-256 over ``prev_hash|content``."""
    return hashlib.sha256(f"{prev_hash}|{row_content}".encode()).hexdigest()


# ---------------------------------------------------------------------------- checking
#
# One checker for the chain, used by recovery (the rows after the latest snapshot, at every
# open) and by ``ledger verify`` (every row). The database builds each row's
# ``prev_hash|content`` text with the same rules as :func:`content` (``coalesce`` writes
# NULL as empty, integers are decimal: ``LedgerStore.chain_rows`` of either storage
# adapter), so the checker only hashes and compares.

ROWS_SQL = CHAIN_ROWS_SQL  # SQLite's text of those rows (the verify threads read it)

GAP_REASON = "rows were deleted or inserted"
GAP, LINK, EDIT = 0, 1, 2  # what broke, in the order the checks of one row report it
MESSAGES = {
    LINK: "prev_hash is not the hash of the row before it (rows deleted, inserted or reordered)",
    EDIT: "hash does not match the row's content (the row was edited)",
}


class Walk:
    """Walks rows of :data:`ROWS_SQL` in order from a known row (``seq``, ``hash``) and
    reports each break as ``(seq, check, message)``; afterwards ``seq``/``hash`` are the
    last row's and ``rows`` how many were read."""

    __slots__ = ("hash", "rows", "seq")

    def __init__(self, seq: int = 0, hash: str = GENESIS) -> None:
        self.seq = seq
        self.hash = hash
        self.rows = 0

    def breaks(self, rows: Iterable[tuple[int, str, str, str]]) -> Generator[tuple[int, int, str]]:
        expected_seq, expected_prev = self.seq + 1, self.hash
        count = 0
        try:
            for seq, prev_hash, row_hash, text in rows:
                count += 1
                if seq != expected_seq:
                    yield seq, GAP, f"expected row {expected_seq} here: {GAP_REASON}"
                if prev_hash != expected_prev:
                    yield seq, LINK, MESSAGES[LINK]
                if sha256(text.encode()).hexdigest() != row_hash:
                    yield seq, EDIT, MESSAGES[EDIT]
                expected_seq, expected_prev = seq + 1, row_hash
        finally:
            self.seq, self.hash, self.rows = expected_seq - 1, expected_prev, self.rows + count
