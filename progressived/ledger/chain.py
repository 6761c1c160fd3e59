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

GENESIS = "0" * 64
FORBIDDEN = ("|", "\n", "\r")


def clean(field: str, value: str) -> str:
    """Return ``value`` if it can be hashed unambiguously, else raise ``ValueError``."""
    if any(ch in value for ch in FORBIDDEN):
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
