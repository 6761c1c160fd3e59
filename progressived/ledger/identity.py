"""Which table and paytable a ledger file was written for, read without writing.

The simulator refuses to mix its rounds into a ledger of another table or paytable; the
question is about the ledger's ``meta`` and its ``ledger_created`` and ``parameter_changed``
rows, so it is answered here (docs/ledger.md).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from progressived.core.wirejson import loads_object
from progressived.ledger.errors import LedgerMismatch
from progressived.ledger.readonly import connect_readonly

MAX_DETAIL_BYTES = 64 * 1024 * 1024
"""A row's detail is read as hostile text (any file may be given): bounded like a script."""

__all__ = ["ledger_identity"]


def ledger_identity(path: Path) -> tuple[str, str]:
    """The table and the current paytable a ledger was written for (read-only).

    The paytable is the one of the ``ledger_created`` row, or of the last recorded
    ``parameter_changed`` that changed it.
    """
    conn = connect_readonly(path)
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        paytable = ""
        for kind, data in conn.execute(
            "SELECT kind, data FROM journal WHERE kind IN ('ledger_created', "
            "'parameter_changed') ORDER BY seq"
        ):
            detail = loads_object(data, max_bytes=MAX_DETAIL_BYTES)  # any file may be given
            if kind == "ledger_created":
                paytable = str(detail.get("paytable", ""))
            elif isinstance(change := detail.get("changes", {}).get("paytable"), dict):
                paytable = str(change.get("new", paytable))
    except (sqlite3.Error, ValueError) as exc:
        why = f"{path}: cannot read the ledger's table and paytable: {exc}"
        raise LedgerMismatch(why) from None
    finally:
        conn.close()
    return str(meta.get("table_id", "")), paytable
