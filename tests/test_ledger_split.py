"""The ledger's write is a pure plan then a commit, and its checks are shared.

* ``plan()`` computes the rows, postings, balances and hashes without I/O (that it imports
  no I/O module is pyproject.toml's import-linter contract ``ledger-plan``), and the rows
  it plans hash exactly as the chain's own functions say;
* ``ledger verify`` splits a long chain between two processes: the halves meet at one row,
  so a break anywhere (also at the meeting row) is found exactly as by one walk.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from bench.stress import demo_params, drive
from progressived.engine import Lock, Sensors, decide, initial_state
from progressived.ledger import Batch, Ledger, chain, plan, verify
from progressived.ledger.rows import Record

# One worker runs the whole module under pytest-xdist (.ci/test: --dist loadgroup):
# its module-scoped long ledger is built once.
pytestmark = pytest.mark.xdist_group("long-ledger")

AT = "2026-11-21T19:00:00.000000Z"
def test_plan_rows_hash_as_the_chain_says_and_nothing_is_written() -> None:
    params = demo_params("t-plan")
    start = initial_state(params, AT)
    lock = decide(params, start.state, Sensors(present=frozenset({1, 2}), at=AT))
    locked = decide(params, lock.state, Lock(at=AT))
    items = [
        Record(kind="ledger_created", detail={"table_id": "t-plan"}, at=AT, actor=""),
        Batch(start.events, start.state, AT),
        Batch(lock.events, lock.state, AT, "dealer", "k-1"),
        Batch(locked.events, locked.state, AT, "dealer", "k-2"),
    ]
    planned = plan.plan(items, plan.CommittedHead(), {}, table_id="t-plan")
    prev = chain.GENESIS
    for row in planned.journal:
        seq, at, table, rnd, seat, kind, category, actor, idem, data, row_hash, row_prev = row
        assert row_prev == prev
        assert row_hash == chain.link(
            prev, chain.content(seq, at, table, rnd, seat, kind, category, actor, idem, data)
        )
        prev = row_hash
    assert planned.head.seq == len(planned.journal) == planned.results[-1].last_seq
    assert planned.head.hash == prev
    assert sum(units for _, _, _, units in planned.postings) == 0
    assert {a: u for a, u, _ in planned.balances} == {
        a: u for a, u in locked.state.balances.items() if a in {b for b, _, _ in planned.balances}
    }
    assert [k for k, _, _ in planned.keys] == ["k-1", "k-2"]
    # A duplicate key writes nothing; unbalanced engine balances are refused before I/O.
    again = plan.plan(items[2:3], planned.head, {"k-1": planned.results[2]}, table_id="t-plan")
    assert again.empty and again.results[0].duplicate
    with pytest.raises(ValueError, match="balances differ"):
        plan.plan([Batch(locked.events, start.state, AT)], planned.head, {}, table_id="t-plan")


@pytest.fixture(scope="module")
def long_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("split") / "ledger.db"
    params = demo_params("t-split")
    with Ledger.open(path, params, at=AT, snapshot_every=100) as ledger:
        drive(ledger, params, rounds=60, seed=9, run="r", group=8)
        ledger.checkpoint()
    return path


def tampered(src: Path, tmp: Path, sql: str, *args: object) -> Path:
    path = tmp / "ledger.db"
    shutil.copy(src, path)
    conn = sqlite3.connect(path, isolation_level=None)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute(sql, args)
    conn.close()
    return path


@pytest.mark.parametrize("where", ["first", "meeting", "after", "second"])
def test_a_split_walk_finds_what_one_walk_finds(
    long_ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    head = sqlite3.connect(long_ledger).execute("SELECT max(seq) FROM journal").fetchone()[0]
    meeting = head // 2  # the split row: the first seq >= head // 2
    seq = {"first": 7, "meeting": meeting, "after": meeting + 1, "second": head - 5}[where]
    bad = tampered(long_ledger, tmp_path, "UPDATE journal SET actor = 'mallory' WHERE seq = ?", seq)
    one = verify.verify(bad, replay=False)
    monkeypatch.setattr(verify, "SPLIT_ROWS", 10)
    split = verify.verify(bad, replay=False)
    assert split.to_dict() == one.to_dict()
    assert split.first_bad_seq == seq
    assert "edited" in str(split.problems[0])
    pristine = verify.verify(long_ledger, replay=False)
    assert pristine.ok and pristine.rows == head and pristine.head_seq == head


def test_a_split_walk_finds_a_deleted_meeting_row(
    long_ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = sqlite3.connect(long_ledger).execute("SELECT max(seq) FROM journal").fetchone()[0]
    gone = head // 2
    bad = tampered(long_ledger, tmp_path, "DELETE FROM journal WHERE seq = ?", gone)
    one = verify.verify(bad, replay=False)
    monkeypatch.setattr(verify, "SPLIT_ROWS", 10)
    split = verify.verify(bad, replay=False)
    assert split.to_dict() == one.to_dict()
    assert split.first_bad_seq is not None and split.first_bad_seq <= gone + 1
    assert not split.ok
