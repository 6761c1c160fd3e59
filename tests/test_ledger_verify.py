"""Tamper evidence: every edit, deletion, insertion or reordering is found by verify,
even after the append-only triggers were dropped, and it names the first bad row."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.stress import demo_params, drive
from progressived.ledger import Ledger, LedgerError, chain
from progressived.ledger.verify import verify

AT = "2026-11-21T19:00:00.000000Z"
PARAMS = demo_params("t-v")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("verify") / "ledger.db"
    with Ledger.open(path, PARAMS, at=AT, snapshot_every=100) as ledger:
        drive(ledger, PARAMS, rounds=40, seed=5, run="r", group=4)
        ledger.checkpoint()
    return path


@pytest.fixture
def db(pristine: Path, tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    shutil.copy(pristine, path)
    return path


@pytest.fixture
def conn(db: Path) -> Iterator[sqlite3.Connection]:
    """A connection of someone who dropped the triggers."""
    c = sqlite3.connect(db, isolation_level=None)
    for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        c.execute(f"DROP TRIGGER {name}")
    yield c
    c.close()


def money_row(conn: sqlite3.Connection, kind: str = "wager_locked", nth: int = 3) -> int:
    rows = conn.execute("SELECT seq FROM journal WHERE kind = ? ORDER BY seq", (kind,)).fetchall()
    return int(rows[nth][0])


def test_pristine_ledger_verifies(pristine: Path) -> None:
    report = verify(pristine)
    assert report.ok, report.problems
    assert report.rows > 300
    assert report.snapshots >= 2
    assert report.identity_gap == 0


def test_edited_amount_in_the_row(db: Path, conn: sqlite3.Connection) -> None:
    seq = money_row(conn)
    data = conn.execute("SELECT data FROM journal WHERE seq = ?", (seq,)).fetchone()[0]
    assert '"units":1000000' in data
    conn.execute(
        "UPDATE journal SET data = ? WHERE seq = ?",
        (data.replace('"units":1000000', '"units":2000000'), seq),
    )
    report = verify(db)
    assert not report.ok
    assert report.first_bad_seq == seq
    assert "edited" in str(report.problems[0])


def test_edited_posting_and_balance(db: Path, conn: sqlite3.Connection) -> None:
    seq = money_row(conn)
    conn.execute("UPDATE postings SET units = units + 1 WHERE seq = ? AND leg = 0", (seq,))
    conn.execute("UPDATE balances SET units = units + 1 WHERE account = 'wagers'")
    report = verify(db)
    assert report.first_bad_seq == seq
    assert "postings table differs" in str(report.problems[0])


def test_edited_balance_only(db: Path, conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE balances SET units = units - 10000 WHERE account = 'meter:main'")
    conn.close()
    report = verify(db)
    assert any("balance of meter:main" in p.message for p in report.problems)
    with pytest.raises(LedgerError, match="balances table differs"):
        Ledger.open(db, PARAMS, at=AT)


def test_deleted_row(db: Path, conn: sqlite3.Connection) -> None:
    seq = money_row(conn, "sensors_changed", 5)
    conn.execute("DELETE FROM journal WHERE seq = ?", (seq,))
    report = verify(db)
    assert report.first_bad_seq == seq + 1
    assert "deleted or inserted" in str(report.problems[0])


def test_deleted_last_rows(db: Path, conn: sqlite3.Connection) -> None:
    head = conn.execute("SELECT max(seq) FROM journal").fetchone()[0]
    conn.execute("DELETE FROM postings WHERE seq > ?", (head - 3,))
    conn.execute("DELETE FROM journal WHERE seq > ?", (head - 3,))
    report = verify(db)
    assert not report.ok
    assert any("meta records head row" in p.message for p in report.problems)


def test_swapped_rows(db: Path, conn: sqlite3.Connection) -> None:
    a = money_row(conn, "sensors_changed", 2)
    b = money_row(conn, "sensors_changed", 3)
    cols = "at, table_id, round, seat, kind, category, actor, idem_key, data, prev_hash, hash"
    row_a = conn.execute(f"SELECT {cols} FROM journal WHERE seq = ?", (a,)).fetchone()
    row_b = conn.execute(f"SELECT {cols} FROM journal WHERE seq = ?", (b,)).fetchone()
    sets = ", ".join(f"{c.strip()} = ?" for c in cols.split(","))
    conn.execute(f"UPDATE journal SET {sets} WHERE seq = ?", (*row_b[:-1], "1" * 64, a))
    conn.execute(f"UPDATE journal SET {sets} WHERE seq = ?", (*row_a, b))
    conn.execute("UPDATE journal SET hash = ? WHERE seq = ?", (row_b[-1], a))
    report = verify(db)
    assert report.first_bad_seq == a


def test_inserted_row_in_the_middle(db: Path, conn: sqlite3.Connection) -> None:
    seq = money_row(conn, "round_locked", 4)
    for table in ("postings", "journal"):
        conn.execute(f"UPDATE {table} SET seq = seq + 1000000 WHERE seq > ?", (seq,))
        conn.execute(f"UPDATE {table} SET seq = seq - 999999 WHERE seq > 1000000")
    # A careful forger chains the new row onto the row before it...
    prev = conn.execute("SELECT hash FROM journal WHERE seq = ?", (seq,)).fetchone()[0]
    fields = (seq + 1, AT, "t-v", 5, 0, "operator_action", "operator", "mallory", None, "{}")
    conn.execute(
        "INSERT INTO journal VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*fields, prev, chain.link(prev, chain.content(*fields))),
    )
    report = verify(db)
    # ...but the rows after it were hashed with their old numbers and predecessor.
    assert report.first_bad_seq == seq + 2
    assert "prev_hash" in str(report.problems[0])


def test_appended_row_with_a_made_up_hash(db: Path, conn: sqlite3.Connection) -> None:
    head, last = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC").fetchone()
    conn.execute(
        "INSERT INTO journal VALUES (?, ?, 't-v', 1, 0, 'start', 'system', '', NULL, '{}', ?, ?)",
        (head + 1, AT, last, "f" * 64),
    )
    report = verify(db)
    assert report.first_bad_seq == head + 1


def test_forged_snapshot(db: Path, conn: sqlite3.Connection) -> None:
    seq, hash_, state = conn.execute(
        "SELECT seq, hash, state FROM snapshots ORDER BY seq DESC"
    ).fetchone()
    forged = state.replace('"meter:main":', '"meter:main":1', 1)
    assert forged != state
    conn.execute("DELETE FROM snapshots WHERE seq = ?", (seq,))
    conn.execute("INSERT INTO snapshots VALUES (?, ?, ?)", (seq, hash_, forged))
    conn.close()
    report = verify(db)
    assert report.first_bad_seq == seq
    assert "snapshot" in str(report.problems[0])
    with pytest.raises(LedgerError):
        Ledger.open(db, PARAMS, at=AT)


def test_open_refuses_a_broken_chain_after_the_snapshot(db: Path, conn: sqlite3.Connection) -> None:
    head = conn.execute("SELECT max(seq) FROM journal").fetchone()[0]
    conn.execute("UPDATE journal SET actor = 'mallory' WHERE seq = ?", (head,))
    conn.close()
    with pytest.raises(LedgerError, match=f"chain breaks at row {head}"):
        Ledger.open(db, PARAMS, at=AT)
