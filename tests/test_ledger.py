"""The ledger's core: creation, appends, balances, idempotency, outbox, recovery."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from bench.stress import demo_params, drive
from progressived.core.params import MeterParams, TableParams
from progressived.engine import Confirm, KeyHand, Lock, Reconcile, Sensors, decide
from progressived.engine.accounts import identity_gap
from progressived.engine.state import Phase, TableState
from progressived.ledger import (
    AppendResult,
    Batch,
    JournalRow,
    Ledger,
    LedgerError,
    LedgerMismatch,
    LedgerUnavailable,
    OutboxMessage,
)
from progressived.ledger.schema import SCHEMA_VERSION
from progressived.ledger.verify import verify

AT = "2026-11-21T19:00:00.000000Z"


@pytest.fixture
def params() -> TableParams:
    return demo_params("t-1")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


def play(ledger: Ledger, params: TableParams, *commands: object, key: str | None = None) -> None:
    state = ledger.state
    for command in commands:
        decision = decide(params, state, replace(command, at=AT))
        assert decision.accepted, getattr(decision, "reason", "")
        state = decision.state
        ledger.append(decision.events, state, at=AT, actor=command.actor, idempotency_key=key)


def test_new_ledger_funds_the_meters(db: Path, params: TableParams) -> None:
    with Ledger.open(db, params, at=AT, software="test 1") as ledger:
        assert ledger.head_seq == 2  # ledger_created + one MeterOpened
        assert ledger.state.balance("meter:main") == params.meters[0].seed
        assert ledger.state.opened == {"main"}
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT seq, kind, category FROM journal ORDER BY seq").fetchall()
    assert rows == [(1, "ledger_created", "system"), (2, "meter_opened", "engine")]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_creation_interrupted_before_the_schema(db: Path, params: TableParams) -> None:
    db.touch()  # the writer died right after creating the file
    with Ledger.open(db, params, at=AT) as ledger:
        assert ledger.head_seq == 2
    assert verify(db).ok


def test_balances_kept_in_the_same_transaction(db: Path, params: TableParams) -> None:
    with Ledger.open(db, params, at=AT) as ledger:
        play(ledger, params, Sensors(present=frozenset({1, 2, 3})), Lock())
        stored = dict(sqlite3.connect(db).execute("SELECT account, units FROM balances"))
        assert stored == dict(ledger.state.balances.items())
        assert stored["wagers"] == -3 * params.wager_units
        assert identity_gap(stored, ["main"]) == 0


def test_append_refuses_a_state_that_disagrees(db: Path, params: TableParams) -> None:
    with Ledger.open(db, params, at=AT) as ledger:
        decision = decide(params, ledger.state, Sensors(present=frozenset({1}), at=AT))
        assert decision.accepted
        locked = decide(params, decision.state, Lock(at=AT))
        assert locked.accepted
        head = ledger.head_seq
        with pytest.raises(LedgerError, match="balances differ"):
            ledger.append(locked.events, decision.state, at=AT)
        assert ledger.head_seq == head
        assert sqlite3.connect(db).execute("SELECT max(seq) FROM journal").fetchone()[0] == head


def test_idempotent_append_returns_the_first_result(db: Path, params: TableParams) -> None:
    with Ledger.open(db, params, at=AT) as ledger:
        sensed = decide(params, ledger.state, Sensors(present=frozenset({2}), at=AT))
        assert sensed.accepted
        first = ledger.append(sensed.events, sensed.state, at=AT, idempotency_key="frame-7")
        assert first == AppendResult(3, 3)
        again = ledger.append(sensed.events, sensed.state, at=AT, idempotency_key="frame-7")
        assert again == AppendResult(3, 3, duplicate=True)
        assert ledger.head_seq == 3
        assert ledger.lookup("frame-7") == AppendResult(3, 3, duplicate=True)
        assert ledger.lookup("frame-8") is None
    with Ledger.open(db, params, at=AT) as ledger:  # survives a restart
        assert ledger.append((), ledger.state, at=AT, idempotency_key="frame-7").duplicate


def test_duplicate_key_inside_one_group(db: Path, params: TableParams) -> None:
    with Ledger.open(db, params, at=AT) as ledger:
        sensed = decide(params, ledger.state, Sensors(present=frozenset({2}), at=AT))
        assert sensed.accepted
        batch = Batch(sensed.events, sensed.state, AT, idempotency_key="k")
        results = ledger.append_many([batch, batch])
        assert results == [AppendResult(3, 3), AppendResult(3, 3, duplicate=True)]
        assert ledger.head_seq == 3


def test_record_and_outbox(db: Path, params: TableParams) -> None:
    seen: list[JournalRow] = []

    def outbox(rows: object) -> list[OutboxMessage]:
        seen.extend(rows)
        return [OutboxMessage("t/t-1/event", f"{row.seq}") for row in seen]

    with Ledger.open(db, params, at=AT) as ledger:
        result = ledger.record(
            "operator_action",
            {"what": "meter display test", "why": "weekly"},
            at=AT,
            actor="op-17",
            outbox=outbox,
        )
        assert result == AppendResult(3, 3)
        assert seen[0].seq == 3
        assert seen[0].category == "operator"
        assert seen[0].data == {"what": "meter display test", "why": "weekly"}
        pending = ledger.outbox_pending()
        assert [(r.seq, r.topic, r.payload, r.qos, r.retain) for r in pending] == [
            (3, "t/t-1/event", "3", 1, False)
        ]
        ledger.outbox_ack([pending[0].id])
        assert ledger.outbox_pending() == []
        conn = sqlite3.connect(db)
        assert conn.execute("SELECT actor, category FROM journal WHERE seq = 3").fetchone() == (
            "op-17",
            "operator",
        )
        p = ledger.record("parameter_changed", {"meter": "main"}, at=AT, actor="op-17")
        assert conn.execute(
            "SELECT category FROM journal WHERE seq = ?", (p.first_seq,)
        ).fetchone() == ("parameter",)
        assert ledger.state == ledger.state  # record() changes no state


def test_outbox_callback_failure_writes_nothing(db: Path, params: TableParams) -> None:
    def broken(rows: object) -> list[OutboxMessage]:
        raise RuntimeError("boom")

    with Ledger.open(db, params, at=AT) as ledger:
        with pytest.raises(RuntimeError):
            ledger.record("start", {}, at=AT, outbox=broken)
        assert ledger.head_seq == 2
        assert ledger.record("start", {}, at=AT) == AppendResult(3, 3)


def test_refuses_separator_characters(db: Path, params: TableParams) -> None:
    with Ledger.open(db, params, at=AT) as ledger:
        with pytest.raises(LedgerError, match="actor"):
            ledger.record("start", {}, at=AT, actor="a|b")
        with pytest.raises(LedgerError, match="kind"):
            ledger.record("bad\nkind", {}, at=AT)
        assert ledger.head_seq == 2


def test_triggers_refuse_update_and_delete(db: Path, params: TableParams) -> None:
    Ledger.open(db, params, at=AT).close()
    conn = sqlite3.connect(db)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE journal SET actor = 'x' WHERE seq = 1")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM journal WHERE seq = 2")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE postings SET units = 0")
    with pytest.raises(sqlite3.IntegrityError):  # STRICT: no float amounts
        conn.execute("INSERT INTO postings VALUES (2, 9, 'meter:main', 1.5)")


def test_recovery_rebuilds_a_round_in_progress(db: Path, params: TableParams) -> None:
    with Ledger.open(db, params, at=AT) as ledger:
        play(
            ledger,
            params,
            Sensors(present=frozenset({1, 4, 6})),
            Lock(),
            Sensors(present=frozenset()),
            KeyHand(seat=4, hand="straight"),
            KeyHand(seat=6, hand="akq-spades"),  # a meter award awaiting the supervisor
        )
        before = ledger.state
    assert before.phase is Phase.LOCKED
    assert before.pending
    assert before.keyed
    with Ledger.open(db, params, at=AT) as ledger:
        assert ledger.state == before
        play(ledger, params, Confirm(actor="supervisor"), Reconcile())
        assert ledger.state.phase is Phase.OPEN
        assert ledger.state.round == 2


def test_recovery_uses_a_snapshot(db: Path, params: TableParams) -> None:
    with Ledger.open(db, params, at=AT, snapshot_every=300) as ledger:
        drive(ledger, params, rounds=150, seed=3, run="r", group=8)
        state, head = ledger.state, ledger.head_seq
    assert head > 1000
    with Ledger.open(db, params, at=AT, snapshot_every=300) as ledger:
        assert ledger.state == state
        assert ledger.recovery.snapshot_seq > 0
        assert ledger.recovery.replayed <= 300
    assert verify(db).ok


def test_recovery_without_snapshot_replays_everything(db: Path, params: TableParams) -> None:
    with Ledger.open(db, params, at=AT) as ledger:
        drive(ledger, params, rounds=5, seed=4, run="r")
        state = ledger.state
    with Ledger.open(db, params, at=AT) as ledger:
        assert ledger.recovery.snapshot_seq == 0
        assert ledger.state == state


def test_refuses_another_tables_ledger(db: Path, params: TableParams) -> None:
    Ledger.open(db, params, at=AT).close()
    with pytest.raises(LedgerMismatch, match="belongs to table 't-1'"):
        Ledger.open(db, demo_params("t-2"), at=AT)


def test_refuses_a_newer_schema(db: Path, params: TableParams) -> None:
    Ledger.open(db, params, at=AT).close()
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(LedgerMismatch, match="newer"):
        Ledger.open(db, params, at=AT)


def test_refuses_a_file_that_is_not_a_ledger(db: Path, params: TableParams) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE other (x)")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerMismatch, match="not a progressived ledger"):
        Ledger.open(db, params, at=AT)


def test_one_writer_at_a_time(db: Path, params: TableParams) -> None:
    with Ledger.open(db, params, at=AT), pytest.raises(LedgerUnavailable, match="another"):
        Ledger.open(db, params, at=AT)
    Ledger.open(db, params, at=AT).close()  # the lock went with the first writer


def test_a_new_meter_is_opened(db: Path, params: TableParams) -> None:
    Ledger.open(db, params, at=AT).close()
    more = replace(params, meters=(*params.meters, MeterParams(id="mini", seed=50_000_000)))
    with Ledger.open(db, more, at=AT) as ledger:
        assert ledger.state.opened == {"main", "mini"}
        assert ledger.state.balance("meter:mini") == 50_000_000
    assert verify(db).ok


def test_ledger_balances_equal_engine_balances(db: Path, params: TableParams) -> None:
    with Ledger.open(db, params, at=AT) as ledger:
        drive(ledger, params, rounds=20, seed=9, run="r", group=3)
        assert isinstance(ledger.state, TableState)
        assert identity_gap(ledger.balances, ["main"]) == 0
        engine = {k: v for k, v in ledger.state.balances.items() if v}
        assert {k: v for k, v in ledger.balances.items() if v} == engine
