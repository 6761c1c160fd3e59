"""What the link witnessed of a table: the last table head and message it applied.

A restore knows the archive's head; a dead board may have held rows after it. The link
journals, with every message it applies, the table ledger's head the message carried
(docs/link.md, "Witnessed heads"), so the link ledger says how far the table's ledger went
at least: a witnessed head beyond the archived one names rows that may be missing. Read
read-only from the link's file or database, while the link runs.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from progressived.ledger.errors import LedgerError
from progressived.ledger.readonly import connect_readonly
from progressived.storage.errors import one_line
from progressived.storage.location import Location, is_url, shown

_SQLITE = """
SELECT json_extract(data, '$.head.seq'), json_extract(data, '$.head.hash'),
       json_extract(data, '$.seq')
FROM journal WHERE kind = 'link_applied' AND json_extract(data, '$.table') = ?
ORDER BY seq DESC LIMIT 1"""
_POSTGRES = """
SELECT (data::jsonb -> 'head' ->> 'seq')::bigint, data::jsonb -> 'head' ->> 'hash',
       (data::jsonb ->> 'seq')::bigint
FROM journal WHERE kind = 'link_applied' AND data::jsonb ->> 'table' = %s
ORDER BY seq DESC LIMIT 1"""


@dataclass(frozen=True, slots=True)
class LinkWitness:
    """The table's head as the link last saw it, and the last message seq it applied."""

    head_seq: int
    head_hash: str
    message_seq: int


def link_witness(location: Location, table: str, password: str | None = None) -> LinkWitness | None:
    """The link ledger at ``location``'s last witness of ``table`` (None: it has none)."""
    row: tuple[Any, ...] | None
    if is_url(location):
        extra: dict[str, Any] = {} if password is None else {"password": password}
        try:
            with psycopg.connect(str(location), autocommit=True, connect_timeout=5, **extra) as c:
                row = c.execute(_POSTGRES, (table,)).fetchone()
        except psycopg.Error as exc:
            raise LedgerError(f"link ledger {shown(location)}: {one_line(exc)}") from None
    else:
        conn = connect_readonly(Path(location))
        try:
            row = conn.execute(_SQLITE, (table,)).fetchone()
        except sqlite3.Error as exc:
            raise LedgerError(f"link ledger {location}: {exc}") from None
        finally:
            conn.close()
    if row is None or row[0] is None:
        return None
    return LinkWitness(int(row[0]), str(row[1]), int(row[2]))
