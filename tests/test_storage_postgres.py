"""The PostgreSQL adapter where one machine's file cannot go: two writers on one database,
and a connection lost during COMMIT. A real server (progressived/testing/postgres.py).

* fencing across connections: holder A's write transaction begins, A's lease lapses, B
  acquires (token + 1), then A goes on to commit: refused, nothing of it stored;
* a commit whose outcome is unknown (the connection is killed while COMMIT waits for a
  synchronous standby: committed locally, never acknowledged): the link ledger re-reads
  the store before it decides or answers anything, and the batch's messages are then
  repeats answered from the stored results.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from progressived.ledger import Fenced, LedgerUnavailable, plan
from progressived.link.store.ledger import LinkLedger
from progressived.link.store.opening import open_store
from progressived.storage.port import Lease
from progressived.storage.postgres import PostgresStore
from progressived.testing.postgres import Server, server
from progressived.testing.waits import until_sync
from tests.link_sim import SimTable, deliver, link_params
from tests.test_storage_contract import AT, LINK, acquire_when_lapsed, money, planned


def wait_for(what: str, check: Any, timeout: float = 30.0) -> Any:
    """Poll the server until ``check()`` holds (a state it reports, not a time): anything but
    None or False (a zero or an empty string is a state)."""
    found: list[Any] = []

    def holds() -> bool:
        found[:] = [check()]
        return found[0] is not None and found[0] is not False

    until_sync(holds, what, timeout, every=0.01)
    return found[0]


def backend(srv: Server, pid: int, column: str) -> object:
    with srv.admin() as conn:
        row = conn.execute(f"SELECT {column} FROM pg_stat_activity WHERE pid = %s", (pid,))
        found = row.fetchone()
    return None if found is None else found[0]


@dataclass
class Paused:
    """Rows of a write that stop half way until ``go`` is set (the transaction is open)."""

    rows: plan.Plan
    go: threading.Event

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rows, name)

    @property
    def postings(self) -> Iterator[tuple[int, int, str, int]]:
        self.go.wait(30)
        yield from self.rows.postings


def test_a_write_begun_before_another_holder_acquired_is_refused(
    postgres_server: Server, postgres_url: str
) -> None:
    a_store, _ = open_store(postgres_url, LINK, AT, "test", "new")
    b_store, _ = open_store(postgres_url, LINK, AT, "test", "existing")
    assert isinstance(a_store, PostgresStore)
    try:
        a = a_store.acquire("a", 0.5)
        a_store.write(planned(a_store, money(1, 1)), fence=a)
        go, failed = threading.Event(), []
        rows = Paused(planned(a_store, money(2, 3)), go)

        def write() -> None:
            try:
                a_store.write(rows, fence=a)
            except Fenced as exc:
                failed.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        pid = a_store.connection().info.backend_pid
        wait_for("A's transaction", lambda: backend(postgres_server, pid, "xact_start"))
        b = acquire_when_lapsed(b_store, "b")  # A's lease lapses meanwhile; B takes over
        assert isinstance(b, Lease) and b.token == a.token + 1
        go.set()
        writer.join(30)
        assert failed, "A's write committed after B acquired the lease"
        assert b_store.last()[0] == 1 and b_store.balances()["meter:pmg"] == 7
        b_store.write(planned(b_store, money(2, 1)), fence=b)  # B writes on
        assert b_store.last()[0] == 2
    finally:
        a_store.close()
        b_store.close()


@pytest.fixture
def waiting_server() -> Iterator[Server]:
    """A server whose COMMIT waits for a synchronous standby that never comes (a commit
    is then durable locally but never acknowledged: a failover's unknown outcome)."""
    with server() as srv:
        yield srv


def test_a_commit_lost_with_its_connection_is_found_before_anything_is_answered(
    waiting_server: Server,
) -> None:
    url = waiting_server.database()
    params = link_params()
    LinkLedger.create(url, params, at=AT, software="test")
    ledger = LinkLedger.open(url, params, holder="c1", lease_s=60)
    try:
        t1 = SimTable("t1")
        first = deliver(params, ledger.book, t1.contribute(3), at_ms=1)
        ledger.commit([(first, 1)])
        with waiting_server.admin() as admin:
            admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
            admin.execute("SELECT pg_reload_conf()")
        message = t1.contribute(2)
        step = deliver(params, ledger.book, message, at_ms=2)
        errors: list[Exception] = []

        def commit() -> None:
            try:
                ledger.commit([(step, 2)])
            except LedgerUnavailable as exc:
                errors.append(exc)

        committing = threading.Thread(target=commit)
        store = ledger.store
        assert isinstance(store, PostgresStore)
        pid = store.connection().info.backend_pid
        committing.start()
        wait_for(
            "COMMIT waiting on sync rep",
            lambda: backend(waiting_server, pid, "wait_event") == "SyncRep",
        )
        with waiting_server.admin() as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
            admin.execute("SELECT pg_reload_conf()")
        committing.join(30)
        assert errors, "the commit did not report its lost connection"
        assert ledger.book.lseq == 1  # nothing moved in memory
        later = deliver(params, ledger.book, t1.contribute(1), at_ms=3)
        with pytest.raises(LedgerUnavailable, match="reached the store after all"):
            ledger.commit([(later, 3)])  # first re-read the store: the batch was there
        assert ledger.book.lseq == 2 and ledger.head.seq == 4
        repeat = deliver(params, ledger.book, message, at_ms=4)
        assert repeat.events == () and repeat.replies  # answered from the stored result
        assert repeat.replies[0].lseq == 2
    finally:
        ledger.close()
    with psycopg.connect(url) as conn:
        count = conn.execute("SELECT count(*) FROM journal WHERE kind = 'link_applied'")
        assert count.fetchone() == (2,)


def test_a_rebuild_longer_than_the_lease_keeps_it_and_no_one_else_can_take_it(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A controller that acquires the lease and then replays for longer than its term
    renews it on the way (on a second connection): it can write when it is ready, and
    a standby trying meanwhile finds it held. Without the renewal the lease lapsed
    during the replay, the standby took it, and the two took it in turn for ever."""
    from progressived.ledger import LeaseHeld
    from progressived.link.core import journal
    from progressived.link.store import recovery

    params = link_params()
    LinkLedger.create(postgres_url, params, at=AT, software="test")
    writer = LinkLedger.open(postgres_url, params, holder="c1", lease_s=60)
    t1 = SimTable("t1")
    try:
        for at in range(1, 41):
            writer.commit([(deliver(params, writer.book, t1.contribute(1), at_ms=at), at)])
        rows = writer.head.seq
    finally:
        writer.close()
    replayed = journal.Replay.row

    def slow_row(self: journal.Replay, kind: str, data: Any) -> Any:
        threading.Event().wait(0.05)  # 40+ rows: a replay of 2 s or more, a 0.6 s term
        return replayed(self, kind, data)

    monkeypatch.setattr(journal.Replay, "row", slow_row)
    monkeypatch.setattr(recovery, "TICK_ROWS", 5)
    standby, _ = open_store(postgres_url, LINK, AT, "test", "existing")
    refused: list[str] = []
    done = threading.Event()

    def try_to_take() -> None:
        while not done.is_set():
            try:
                standby.acquire("c2", 0.6)
                refused.append("acquired")
                return
            except LeaseHeld:
                refused.append("held")
            done.wait(0.1)

    ledger = None
    taker = threading.Thread(target=try_to_take)
    try:
        opened = threading.Event()
        result: list[LinkLedger] = []

        def open_slowly() -> None:
            result.append(LinkLedger.open(postgres_url, params, holder="c3", lease_s=0.6))
            opened.set()

        opener = threading.Thread(target=open_slowly)
        opener.start()
        wait_for("c3's lease", lambda: (lease := standby.lease()) and lease.holder == "c3")
        taker.start()
        opener.join(60)
        assert result, "the ledger did not open"
        ledger = result[0]
        assert ledger.recovery.seconds > 3 * 0.6  # the replay outlasted the term thrice
        done.set()
        taker.join(10)
        assert refused and set(refused) == {"held"}, refused
        monkeypatch.undo()
        step = deliver(params, ledger.book, t1.contribute(1), at_ms=99)
        ledger.commit([(step, 99)])  # its lease is still current: the write is not fenced
        assert ledger.head.seq == rows + 1
    finally:
        done.set()
        if taker.is_alive():
            taker.join(10)
        if ledger is not None:
            ledger.close()
        standby.close()


def test_a_rebuild_renews_on_one_second_connection_not_a_new_one_each_time(
    postgres_url: str,
) -> None:
    """A host of the URL frozen (a primary SIGSTOPped: it takes connections and never
    answers) costs each new connection a connect timeout. The rebuild's renewals use one
    second connection, kept until the rebuild ends, so they pay it once; a new connection
    per renewal paid it every time -- more than a third of a 5 s term -- and in the chaos
    run a controller held the lease while its rebuild crawled, serving nobody."""
    import socket

    frozen = socket.socket()
    frozen.bind(("127.0.0.1", 0))
    frozen.listen(16)  # never accepted, never answered: as a stopped server's kernel does
    port = frozen.getsockname()[1]
    url = postgres_url.replace("@127.0.0.1:", f"@127.0.0.1:{port},127.0.0.1:", 1)
    url += "&connect_timeout=1&target_session_attrs=read-write"
    LinkLedger.create(postgres_url, link_params(), at=AT, software="test")
    store, _ = open_store(url, LINK, AT, "test", "existing")
    waiting: list[socket.socket] = []
    try:
        lease = store.acquire("c1", 30)
        for _ in range(3):
            lease = store.renew_aside(lease)
        # the frozen host: one attempt by the main connection, one by the renewals'
        frozen.setblocking(False)
        while True:
            try:
                waiting.append(frozen.accept()[0])
            except BlockingIOError:
                break
        assert len(waiting) == 2, len(waiting)
        store.renew(lease)  # the main connection renews again: the rebuild is over
        with psycopg.connect(postgres_url) as conn:
            sessions = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            ).fetchone()
        assert sessions == (1,)  # the second connection was closed
    finally:
        store.close()
        for peer in [*waiting, frozen]:
            peer.close()
        frozen.close()
