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


async def test_the_archived_head_must_be_a_row_of_this_ledger(tmp_path: Path) -> None:
    from progressived.archive.feed.feed import ArchiveFeed
    from progressived.mqtt.client import BrokerOptions
    from progressived.mqtt.session import MqttSession

    path = table_ledger(tmp_path / "ledger.db", rounds=3)
    rows = rows_of(path)
    reasons: list[str] = []
    feed = ArchiveFeed(
        session=MqttSession(BrokerOptions()),
        prefix="progressive",
        table_id=TABLE,
        ledger_path=path,
        head_seq=lambda: rows[-1].seq,
        max_lag_rows=10_000,
        max_lag_s=1e9,
        resend_s=10,
        note=reasons.append,
    )
    try:

        def head(seq: int, hash: str) -> wire.HeadMessage:
            return wire.HeadMessage("archive", TABLE, seq, hash, "ok", "", "", "t")

        feed.answer = head(rows[4].seq, rows[4].hash)
        await feed.measure()
        assert reasons[-1] == "" and feed.lag_rows == len(rows) - 5
        feed.answer = head(rows[5].seq, rows[4].hash)  # another chain's row 6
        await feed.measure()
        assert f"the archive's row {rows[5].seq} is not this ledger's row" in reasons[-1]
        assert feed.status()["mismatch"] and not feed.status()["healthy"]
        feed.answer = head(rows[-1].seq + 50, rows[-1].hash)  # beyond this ledger
        await feed.measure()
        assert "beyond this ledger's head" in reasons[-1]
        feed.answer = head(rows[-1].seq, rows[-1].hash)
        await feed.measure()
        assert reasons[-1] == "" and feed.lag_rows == 0 and feed.lag_seconds == 0.0
    finally:
        feed.close()
