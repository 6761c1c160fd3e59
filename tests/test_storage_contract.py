"""The storage port's contract, one set of tests run unchanged against both adapters: a SQLite
file and a real PostgreSQL server (progressived/testing/postgres.py, a free loopback port).

Open and close, refusing a missing or foreign store, commit and read back, the chain
verifying from what the store gives back, snapshots and their cadence, idempotency (a
table's sequence twice), the head, the lease and its fencing, a failed commit leaving
nothing; and the link ledger on top (create, open replaying the same book).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from progressived.engine.events import Posting
from progressived.ledger import (
    Fenced,
    LeaseHeld,
    LedgerError,
    LedgerExists,
    LedgerMismatch,
    LedgerMissing,
    chain,
    plan,
)
from progressived.ledger.rows import Record
from progressived.link.core import book
from progressived.link.store.ledger import LinkLedger
from progressived.link.store.opening import open_store
from progressived.storage.location import Location
from progressived.storage.port import LedgerStore
from progressived.testing.waits import until_sync
from tests.link_sim import SimTable, deliver, link_params

AT = "2026-11-23T17:00:00Z"
LINK = "link-a"


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Location:
    """An empty place for a ledger: a file path, or a new database's URL."""
    if request.param == "sqlite":
        return tmp_path / "link.db"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def store(where: Location) -> Iterator[LedgerStore]:
    made, _meta = open_store(where, LINK, AT, "test", "new")
    yield made
    made.close()


def money(seq_from: int, n: int, units: int = 7) -> list[Record]:
    """``n`` engine rows with balanced postings, each with the idempotency key t1:SEQ."""
    return [
        Record(
            kind="link_applied",
            detail={"n": seq_from + i},
            at=AT,
            actor="t1",
            category="engine",
            idempotency_key=f"t1:{seq_from + i}",
            postings=(Posting("linked_wagers:pmg", -units), Posting("meter:pmg", units)),
        )
        for i in range(n)
    ]


def planned(store: LedgerStore, records: list[Record], snapshot: str | None = None) -> plan.Plan:
    seq, digest = store.last()
    head = plan.CommittedHead(seq, digest, store.balances())
    rows = plan.plan(records, head, {}, table_id=LINK, snapshot_every=2**62)
    if snapshot is not None:
        rows = plan.dataclasses.replace(rows, snapshot=(rows.head.seq, rows.head.hash, snapshot))
    return rows


def test_open_refuses_missing_existing_and_foreign(
    where: Location, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with pytest.raises(LedgerMissing):
        open_store(where, LINK, AT, "test", "existing")
    made, meta = open_store(where, LINK, AT, "test", "new")
    assert meta["table_id"] == LINK and meta["head_seq"] == "0"
    made.close()
    made.close()  # twice is harmless
    with pytest.raises(LedgerError):
        made.last()  # closed
    with pytest.raises(LedgerExists):
        open_store(where, LINK, AT, "test", "new")
    again, meta = open_store(where, LINK, AT, "test", "existing")
    assert again.last() == (0, chain.GENESIS)
    again.close()
    if isinstance(where, Path):
        other: Location = tmp_path / "foreign.db"
        with sqlite3.connect(other) as conn:
            conn.execute("CREATE TABLE customers (id INTEGER)")
    else:
        other = request.getfixturevalue("postgres_server").database()
        with psycopg.connect(other, autocommit=True) as conn:
            conn.execute("CREATE TABLE customers (id bigint)")
    with pytest.raises(LedgerMismatch):
        open_store(other, LINK, AT, "test", "existing")


def test_commit_reads_back_and_the_chain_verifies(store: LedgerStore) -> None:
    rows = planned(store, money(1, 5))
    store.write(rows)
    assert store.last() == (5, rows.head.hash)
    assert store.meta()["head_seq"] == "5" and store.meta()["head_hash"] == rows.head.hash
    assert store.balances() == {"linked_wagers:pmg": -35, "meter:pmg": 35}
    assert [(s, k) for s, k, _d in store.rows(3)] == [(4, "link_applied"), (5, "link_applied")]
    walk = chain.Walk()
    assert list(walk.breaks(store.chain_rows(0, 2**62))) == []
    assert (walk.seq, walk.hash) == (5, rows.head.hash)
    store.write(planned(store, money(6, 2)))
    walk = chain.Walk(5, rows.head.hash)  # from a known row, as recovery does
    assert list(walk.breaks(store.chain_rows(5, 2**62))) == [] and walk.seq == 7


def test_the_same_rows_make_the_same_chain_on_both(tmp_path: Path, postgres_url: str) -> None:
    heads = []
    for where in (tmp_path / "a.db", postgres_url):
        made, _ = open_store(where, LINK, AT, "test", "new")
        made.write(planned(made, money(1, 4)))
        heads.append((made.last(), list(made.chain_rows(0, 99))))
        made.close()
    assert heads[0] == heads[1]


def test_snapshots_newest_first_naming_their_row(store: LedgerStore) -> None:
    assert store.snapshots(3) == []
    store.write(planned(store, money(1, 3), snapshot='{"at":3}'))
    store.write(planned(store, money(4, 3)))
    store.write(planned(store, money(7, 3), snapshot='{"at":9}'))
    found = store.snapshots(3)
    assert [s for s, _h, _j in found] == [9, 3]
    assert all(h == j for _s, h, j in found)
    assert store.snapshot_text(3) == '{"at":3}'
    with pytest.raises(LedgerError):
        store.snapshot_text(4)


def test_a_failed_commit_leaves_nothing(store: LedgerStore) -> None:
    store.write(planned(store, money(1, 2)))
    before = (store.last(), store.balances(), store.meta())
    twice = planned(store, money(2, 1))  # t1:2 again: the idempotency key is unique
    with pytest.raises(LedgerError):
        store.write(twice)
    assert (store.last(), store.balances(), store.meta()) == before
    store.write(planned(store, money(3, 1)))  # and the store goes on
    assert store.last()[0] == 3


def test_lease_acquire_renew_release_and_fencing(store: LedgerStore) -> None:
    assert store.lease() is None
    a = store.acquire("a", 60)
    assert (a.holder, a.token) == ("a", 1)
    with pytest.raises(LeaseHeld):
        store.acquire("b", 60)
    store.write(planned(store, money(1, 1)), fence=a)
    a = store.renew(a)
    again = store.acquire("a", 60)  # the holder itself: a new token fences its old one
    assert again.token == 2
    before = store.last()
    with pytest.raises(Fenced):
        store.write(planned(store, money(2, 1)), fence=a)
    with pytest.raises(Fenced):
        store.renew(a)
    assert store.last() == before
    store.release(again)
    with pytest.raises(Fenced):
        store.write(planned(store, money(2, 1)), fence=again)
    b = store.acquire("b", 60)
    assert b.token == 3 and store.lease() is not None and store.lease().holder == "b"
    store.write(planned(store, money(2, 1)), fence=b)
    assert store.last()[0] == 2


def acquire_when_lapsed(store: LedgerStore, holder: str) -> object:
    """Wait for the current lease to lapse by the database's clock: acquire until it may."""

    def acquired() -> object:
        try:
            return store.acquire(holder, 60)
        except LeaseHeld:
            return None

    return until_sync(acquired, f"the lease to lapse for {holder}", 30)


def test_a_lapsed_lease_is_taken_over_and_its_holder_writes_nothing(store: LedgerStore) -> None:
    a = store.acquire("a", 0.3)
    store.write(planned(store, money(1, 1)), fence=a)
    b = acquire_when_lapsed(store, "b")
    assert getattr(b, "token", None) == a.token + 1
    with pytest.raises(Fenced):
        store.write(planned(store, money(2, 1)), fence=a)
    assert store.last()[0] == 1 and store.balances()["meter:pmg"] == 7


def test_the_link_ledger_on_either_store(where: Location) -> None:
    params = link_params()
    LinkLedger.create(where, params, at=AT, software="test")
    t1 = SimTable("t1")
    with LinkLedger.open(where, params, snapshot_every=4) as ledger:
        state, steps = ledger.book, []
        for i in range(6):
            step = deliver(params, state, t1.contribute(3, round_no=i + 1), at_ms=i)
            state = step.state
            steps.append((step, i))
        ledger.commit(steps[:3])
        ledger.commit(steps[3:])
        head, kept = ledger.head, ledger.book
        # every 4 rows at the end of a commit: 2 made by create + 3 = 5, then 3 more
        assert [seq for seq, _h, _j in ledger.store.snapshots(5)] == [5]
        repeat = deliver(params, ledger.book, t1.sent[0], at_ms=9)
        assert repeat.events == ()  # the book answers a repeat from its stored result
    with LinkLedger.open(where, params) as again:
        assert (again.head, again.book) == (head, kept)
        assert (again.recovery.snapshot_seq, again.recovery.replayed) == (5, 3)
    with pytest.raises(LedgerExists):
        LinkLedger.create(where, params, at=AT, software="test")
    assert book.open_book(params).lseq == 0


def test_a_file_deleted_or_replaced_under_the_store_is_named(
    store: LedgerStore, where: Location
) -> None:
    """The daemons look every second (docs/operations.md, "Health"): a SQLite file deleted,
    then replaced by another, is said; a database has no file under the process."""
    assert store.file_problem() is None
    if not isinstance(where, Path):
        return
    where.unlink()
    assert store.file_problem() == f"ledger file {where} was deleted (or moved) under the running process"
    where.write_bytes(b"")  # another file at the path
    assert store.file_problem() == f"ledger file {where} was replaced (another file) under the running process"
