"""The link ledger on a replicated PostgreSQL failed over by Patroni (docs/ha.md): one rig for
the module (progressived/testing/ha: 3 etcd members, 3 Patroni/PostgreSQL nodes on loopback
ports, synchronous_mode and synchronous_mode_strict, synchronous_commit = on).

* the rig starts with a synchronous standby, in the DCS and in pg_stat_replication;
* a write acknowledged by PostgresStore survives SIGKILL of the primary and is read from the
  new primary, the former synchronous standby, which the same store (its multi-host URL)
  reaches and writes to; the killed node rejoins (pg_rewind) holding the rows;
* with the synchronous standby frozen, the loss of the primary promotes nobody (the other
  replica is not a candidate), until the synchronous standby wakes;
* with both standbys lost, a commit waits and is not acknowledged (strict mode), and is
  once a standby is back;
* a frozen old primary woken after the failover acknowledges nothing (its PostgreSQL alone
  waits for a synchronous standby that is gone; its Patroni demotes it), and the old lease
  holder is fenced at the new primary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import conninfo

from progressived.ledger import Fenced, LedgerUnavailable, chain
from progressived.link.store.opening import open_store
from progressived.storage.postgres import PostgresStore
from progressived.testing.ha import DatabaseCluster, PatroniNode, database_cluster, settings
from tests.test_storage_contract import AT, LINK, money, planned

# ``healthy`` restarts the nodes a test killed: they belong to the module's cluster.
# In the reliability suite (each test is a failover: about two minutes for the module).
pytestmark = [
    pytest.mark.reliability,
    pytest.mark.timeout(240),
    pytest.mark.processes_outlive("the module-scoped cluster's nodes, restarted"),
]


@pytest.fixture(scope="module")
def db() -> Iterator[DatabaseCluster]:
    with database_cluster(3) as cluster:
        yield cluster


@pytest.fixture
def healthy(db: DatabaseCluster) -> Iterator[DatabaseCluster]:
    """The rig whole before and after each test (a killed node restarted, a paused one
    woken, all streaming again)."""
    db.wait_healthy()
    yield db
    for node in db.nodes:
        if node.name in db.paused:
            db.resume(node)
        db.restart(node)
    db.wait_healthy()


def new_store(db: DatabaseCluster) -> tuple[PostgresStore, str]:
    url = db.database()
    store, _ = open_store(url, LINK, AT, "test", "new")
    assert isinstance(store, PostgresStore)
    return store, url


def rows_on(node: PatroniNode, url: str) -> tuple[int, str] | None:
    """The ledger's head read on ``node`` itself (a standby answers read-only); None while
    the node does not take connections. A rejoining old primary is restarted by its Patroni
    (demoted, rewound, started as a replica) and may refuse with "the database system is
    shutting down" even after the cluster looked healthy once (seen in CI's short run)."""
    database = conninfo.conninfo_to_dict(url)["dbname"]
    try:
        with psycopg.connect(
            host=str(node.sockets), port=node.pg_port, user="postgres", dbname=database
        ) as conn:
            row = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    except psycopg.OperationalError:
        return None
    return (0, chain.GENESIS) if row is None else (int(row[0]), str(row[1]))


def write_until_committed(store: PostgresStore, seq: int, lease: object) -> int:
    """Write rows ``seq..seq+2`` until a commit is acknowledged; the failed tries."""
    failed = 0
    deadline = time.monotonic() + 90
    while True:
        try:
            store.write(planned(store, money(seq, 3)), fence=lease)
            return failed
        except LedgerUnavailable:
            failed += 1
            assert time.monotonic() < deadline, "no primary took the write in 90 s"
            time.sleep(0.02)


def test_the_rig_starts_with_a_synchronous_standby(healthy: DatabaseCluster) -> None:
    db = healthy
    primary, standby = db.primary(), db.sync_standby()
    assert primary is not None and standby is not None and standby is not primary
    streams = dict(db.streaming(primary))
    assert streams[standby.name] == "sync"
    assert sorted(streams) == sorted(n.name for n in db.nodes if n is not primary)
    with db.admin(primary) as conn:
        shown = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]
            for name in ("synchronous_commit", "synchronous_standby_names")
        }
    assert shown["synchronous_commit"] == "on"
    assert standby.name in shown["synchronous_standby_names"]
    status, config = primary.rest("/config")
    assert status == 200
    assert config["synchronous_mode"] is True and config["synchronous_mode_strict"] is True
    assert config["ttl"] == settings.TTL_S and config["loop_wait"] == settings.LOOP_WAIT_S
    assert db.url("x").count("127.0.0.1:") == 3 and "target_session_attrs=read-write" in db.url("x")


def test_an_acknowledged_write_survives_sigkill_of_the_primary(healthy: DatabaseCluster) -> None:
    """One failover (more, and the time each takes: python -m bench.ha_failover)."""
    db = healthy
    store, url = new_store(db)
    try:
        lease = store.acquire("link-1", 30.0)
        old, standby = db.primary(), db.sync_standby()
        assert old is not None and standby is not None
        store.write(planned(store, money(1, 3)), fence=lease)
        acknowledged = store.last()
        fault = time.monotonic()
        db.kill(old)
        failed = write_until_committed(store, 4, lease)
        took = time.monotonic() - fault
        new = db.primary()
        assert new is standby, f"{new and new.name} promoted, not {standby.name}"
        assert failed > 0  # the first try after the fault did fail: a real failover
        assert store.connection().info.port == standby.pg_port  # the multi-host URL found it
        fresh = PostgresStore(url)
        walk = chain.Walk()
        assert list(walk.breaks(fresh.chain_rows(0, 2**62))) == []
        assert walk.seq == 6 and acknowledged[0] == 3
        assert fresh.balances() == {"linked_wagers:pmg": -42, "meter:pmg": 42}
        fresh.close()
        db.restart(old)
        db.wait_healthy()
        head = store.last()  # the rejoined node (rewound to the new timeline) replays them
        db.wait(f"{old.name} replaying up to {head}", lambda: rows_on(old, url) == head, 60)
        print(f"failover, fault -> first write committed: {took:.2f} s")
    finally:
        store.close()


def test_only_the_synchronous_standby_is_promoted(healthy: DatabaseCluster) -> None:
    db = healthy
    old, standby = db.primary(), db.sync_standby()
    assert old is not None and standby is not None
    (other,) = [n for n in db.nodes if n not in (old, standby)]
    db.pause(standby)  # frozen: its replication connection stays open (wal_sender_timeout)
    db.kill(old)
    # The leader key expires within ttl; a loop later a candidate would have promoted.
    quiet_until = time.monotonic() + settings.TTL_S + 4 * settings.LOOP_WAIT_S + 2
    while time.monotonic() < quiet_until:
        assert other.rest("/primary")[0] != 200, "the asynchronous replica was promoted"
        assert not other.writable(), "the asynchronous replica was promoted"
        time.sleep(0.2)
    assert db.primary() is None
    db.resume(standby)
    assert db.wait_for_new_primary(old) is standby


def test_with_no_standby_left_a_commit_waits_and_is_not_acknowledged(
    healthy: DatabaseCluster,
) -> None:
    """Strict mode: the primary alone never acknowledges (it does not fall back to
    asynchronous); the commit completes once a standby streams again."""
    db = healthy
    store, url = new_store(db)
    try:
        lease = store.acquire("link-1", 120.0)
        store.write(planned(store, money(1, 3)), fence=lease)
        primary = db.primary()
        assert primary is not None
        standbys = [n for n in db.nodes if n is not primary]
        for node in standbys:
            db.kill(node)
        outcome: list[BaseException | None] = []

        def commit() -> None:
            try:
                store.write(planned(store, money(4, 3)), fence=lease)
                outcome.append(None)
            except Exception as exc:  # reported by the assertion below
                outcome.append(exc)

        waiter = threading.Thread(target=commit, daemon=True)
        waiter.start()
        waiter.join(settings.TTL_S)  # Patroni had loops enough to go asynchronous: it did not
        assert outcome == [], "a commit was acknowledged with no standby left"
        db.restart(standbys[0])
        waiter.join(90)
        assert outcome == [None]  # the standby back: the commit acknowledged
        assert store.last()[0] == 6
    finally:
        store.close()


def test_a_woken_old_primary_acknowledges_nothing(healthy: DatabaseCluster) -> None:
    db = healthy
    holder, url = new_store(db)
    raw: psycopg.Connection[tuple[object, ...]] | None = None
    try:
        old = db.primary()
        assert old is not None
        lease = holder.acquire("link-1", 1.0)
        holder.write(planned(holder, money(1, 3)), fence=lease)
        raw = psycopg.connect(url)
        assert raw.info.port == old.pg_port
        raw.execute("CREATE TABLE probe (x int)")
        raw.commit()
        raw.execute("INSERT INTO probe VALUES (1)")  # a transaction open on the old primary
        db.pause(old)
        new = db.wait_for_new_primary(old)
        successor = PostgresStore(url)
        taken = successor.acquire("link-2", 30.0)  # the old lease lapsed meanwhile
        assert taken.token == lease.token + 1
        successor.write(planned(successor, money(4, 3)), fence=taken)

        # Only PostgreSQL wakes: no Patroni to demote it. Its COMMIT waits for a synchronous
        # standby that now follows another primary: it is not acknowledged.
        db.wake_postgres(old)
        outcome: list[BaseException | None] = []

        def commit() -> None:
            try:
                assert raw is not None
                raw.commit()
                outcome.append(None)
            except psycopg.Error as exc:
                outcome.append(exc)

        waiter = threading.Thread(target=commit, daemon=True)
        waiter.start()
        waiter.join(3.0)
        assert outcome == [], "the old primary acknowledged a commit on its own"
        with pytest.raises((Fenced, LedgerUnavailable)):
            holder.write(planned(holder, money(4, 3)), fence=lease)  # lapsed there too

        db.resume(old)  # its Patroni sees another leader and demotes it
        waiter.join(60.0)
        assert len(outcome) == 1 and isinstance(outcome[0], psycopg.Error), outcome
        with psycopg.connect(url) as conn:
            assert conn.info.port == new.pg_port
            assert conn.execute("SELECT count(*) FROM probe").fetchone() == (0,)
        # The old holder, connected again through the multi-host URL, is fenced there.
        deadline = time.monotonic() + 60
        while True:
            try:
                holder.write(planned(holder, money(7, 3)), fence=lease)
            except Fenced:
                if holder.connection().info.port == new.pg_port:
                    break
            except LedgerUnavailable:
                pass
            else:
                pytest.fail("the old holder's write was committed")
            assert time.monotonic() < deadline
            time.sleep(0.05)
        head = successor.last()
        assert head[0] == 6
        successor.close()
        db.wait_healthy()
        # rejoined: rewound (the probe's row gone), replaying the new primary's rows
        db.wait(f"{old.name} replaying up to {head}", lambda: rows_on(old, url) == head, 60)
    finally:
        holder.close()
        if raw is not None:
            raw.close()
