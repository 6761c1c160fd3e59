"""The table's feed reads its journal for the archive in runs that fit one message, and
says which row cannot fit at all (docs/archive.md, "The table's side")."""

from __future__ import annotations

from pathlib import Path

from progressived.archive.core import wire
from progressived.archive.feed.feed import read_rows
from progressived.ledger.readonly import connect_readonly
from tests.archive_helpers import TABLE, rows_of, table_ledger


def test_rows_fit_one_message(tmp_path: Path) -> None:
    path = table_ledger(tmp_path / "big.db", rounds=40)
    conn = connect_readonly(path)
    try:
        batch, too_large = read_rows(conn, 0)
        assert too_large is None
        assert batch == rows_of(path)[: len(batch)]  # the journal's rows exactly
        assert len(wire.encode_rows(TABLE, batch)) <= wire.MAX_MESSAGE
        small, _ = read_rows(conn, 0, room=3000)
        assert 0 < len(small) < len(batch)
        none, stuck = read_rows(conn, 0, room=150)
        assert none == [] and stuck == 1
    finally:
        conn.close()
