"""A full disk or a read-only ledger: a clear LedgerUnavailable, nothing committed lost,
the same call succeeds once the cause is gone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bench.stress import demo_params, drive
from progressived.engine import Lock, Sensors, decide
from progressived.ledger import Ledger, LedgerUnavailable
from progressived.ledger.verify import verify

AT = "2026-11-21T19:00:00.000000Z"
PARAMS = demo_params("t-f")


def test_full_disk_then_space_returns(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with Ledger.open(db, PARAMS, at=AT) as ledger:
        drive(ledger, PARAMS, rounds=5, seed=1, run="a")
        pages = ledger._conn.execute("PRAGMA page_count").fetchone()[0]
        ledger._conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is now full
        head, state, hash_ = ledger.head_seq, ledger.state, ledger.head_hash
        with pytest.raises(LedgerUnavailable, match="full"):
            drive(ledger, PARAMS, rounds=50, seed=2, run="b", group=50)
        assert (ledger.head_seq, ledger.state, ledger.head_hash) == (head, state, hash_)
        assert ledger.lookup("b:0") is None
        ledger._conn.execute("PRAGMA max_page_count = 1073741823")  # space returns
        drive(ledger, PARAMS, rounds=5, seed=2, run="b", group=5)
        assert ledger.head_seq > head
        final = ledger.state
    report = verify(db)
    assert report.ok, report.problems
    with Ledger.open(db, PARAMS, at=AT) as ledger:
        assert ledger.state == final


def test_read_only_ledger(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with Ledger.open(db, PARAMS, at=AT) as ledger:
        ledger._conn.execute("PRAGMA query_only = ON")  # as if the file turned read-only
        sensed = decide(PARAMS, ledger.state, Sensors(present=frozenset({1}), at=AT))
        assert sensed.accepted
        with pytest.raises(LedgerUnavailable, match="readonly"):
            ledger.append(sensed.events, sensed.state, at=AT, idempotency_key="f1")
        assert ledger.head_seq == 2
        ledger._conn.execute("PRAGMA query_only = OFF")
        assert ledger.append(sensed.events, sensed.state, at=AT, idempotency_key="f1").last_seq == 3
        locked = decide(PARAMS, ledger.state, replace(Lock(), at=AT))
        assert locked.accepted
        ledger.append(locked.events, locked.state, at=AT)
    assert verify(db).ok


def test_unwritable_directory(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "ledger.db"
    with pytest.raises(LedgerUnavailable):
        Ledger.open(missing, PARAMS, at=AT)


def test_checkpoint_truncates_the_wal(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with Ledger.open(db, PARAMS, at=AT) as ledger:
        drive(ledger, PARAMS, rounds=10, seed=1, run="a")
        wal = db.with_name(db.name + "-wal")
        assert wal.stat().st_size > 0
        ledger.checkpoint()
        assert wal.stat().st_size == 0
        assert ledger._conn.execute("PRAGMA journal_size_limit").fetchone()[0] > 0


def test_after_a_failed_write_the_head_is_read_again(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with Ledger.open(db, PARAMS, at=AT) as ledger:
        row2 = ledger.head_hash
        ledger.record("start", {}, at=AT)
        # As if COMMIT had reported an I/O error after SQLite made it durable.
        ledger._head_seq, ledger._head_hash, ledger._stale = 2, row2, True
        assert ledger.record("stop", {}, at=AT).first_seq == 4
    assert verify(db).ok


def test_outbox_ack_leaves_the_journal_at_synchronous_full(tmp_path: Path) -> None:
    from progressived.ledger import OutboxMessage
    from tests.helpers import table

    with Ledger.open(tmp_path / "l.db", table(), at="2026-11-21T00:00:00Z") as ledger:
        ledger.record(
            "note",
            {},
            at="2026-11-21T00:00:01Z",
            outbox=lambda rows: [OutboxMessage("t/x", "{}") for _ in rows],
        )
        pending = ledger.outbox_pending()
        assert len(pending) == 1
        ledger.outbox_ack([pending[0].id])
        assert ledger.outbox_pending() == []
        assert ledger._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
