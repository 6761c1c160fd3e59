"""The database part of the HA rig: 3 etcd members and 2-3 Patroni/PostgreSQL nodes on
loopback ports of one machine, with the faults a test injects (SIGKILL, SIGSTOP, SIGCONT a
node) and the questions it asks (which node is primary, which the synchronous standby).

Composable: :class:`DatabaseCluster` knows nothing of link controllers or brokers; a larger
rig holds one and gives its :meth:`DatabaseCluster.url` to the controllers it starts.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from progressived.testing.ha.etcd import EtcdCluster
from progressived.testing.ha.patroni import PatroniNode, Secrets
from progressived.testing.ha.process import signal_all, stop_all, tree
from progressived.testing.postgres import (
    ROLE,
    PostgresUnavailable,
    _os_user,
    available,
    create_database,
)

START_TIMEOUT_S = 120.0  # bootstrap and base backups on a loaded 2-core machine
FAILOVER_TIMEOUT_S = 60.0
POLL_S = 0.05

T = TypeVar("T")


class ClusterTimeout(TimeoutError):
    """The cluster did not reach a state in time (the message says which, with logs)."""


def rig_available() -> bool:
    """PostgreSQL 15, Patroni and etcd are installed (Debian: postgresql-15, patroni,
    etcd-server)."""
    return available() and bool(shutil.which("patroni")) and bool(shutil.which("etcd"))


@dataclass
class DatabaseCluster:
    """A running cluster (made by :func:`database_cluster`): its nodes, the faults, the
    questions and the URL. ``paused`` names the nodes frozen by :meth:`pause` (they hold
    their sockets open and answer nothing, so no question is put to them)."""

    root: Path
    etcd: EtcdCluster
    nodes: list[PatroniNode]
    password: str  # the ``progressived`` role's
    passfile: Path
    paused: set[str] = field(default_factory=set)

    # ------------------------------------------------------------------ questions

    def node(self, name: str) -> PatroniNode:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def reachable(self) -> list[PatroniNode]:
        """Nodes running and not paused (the ones that can answer)."""
        return [n for n in self.nodes if n.child.running() and n.name not in self.paused]

    def primary(self) -> PatroniNode | None:
        """The node whose Patroni holds the leader key with a read-write PostgreSQL."""
        found = [n for n in self.reachable() if n.is_primary()]
        return found[0] if len(found) == 1 else None

    def members(self) -> list[dict[str, Any]]:
        """``/cluster``'s members as a reachable node sees the DCS (role, state, lag)."""
        for node in self.reachable():
            status, body = node.rest("/cluster")
            if status == 200 and isinstance(body, dict):
                return [m for m in body.get("members", []) if isinstance(m, dict)]
        return []

    def sync_standby(self) -> PatroniNode | None:
        """The node the DCS records as synchronous standby (the only one Patroni promotes)."""
        names = [m.get("name") for m in self.members() if m.get("role") == "sync_standby"]
        return self.node(str(names[0])) if len(names) == 1 else None

    def wait(self, what: str, check: Callable[[], T | None], timeout_s: float) -> T:
        """Poll ``check`` until it returns something; :class:`ClusterTimeout` (with the
        nodes' log tails) after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while (found := check()) is None or found is False:
            for node in self.nodes:
                if node.child.popen is not None and node.child.popen.poll() is not None:
                    raise RuntimeError(
                        f"{node.child.name} exited ({node.child.popen.returncode}) while "
                        f"waiting for {what}:\n{node.child.tail()}"
                    )
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {n.name}\n{n.child.tail(1500)}" for n in self.nodes)
                raise ClusterTimeout(f"timed out ({timeout_s:.0f} s) waiting for {what}\n{tails}")
            time.sleep(POLL_S)
        return found

    def wait_for_primary(self, timeout_s: float = FAILOVER_TIMEOUT_S) -> PatroniNode:
        return self.wait("a primary", self.primary, timeout_s)

    def wait_for_new_primary(
        self, old: PatroniNode, timeout_s: float = FAILOVER_TIMEOUT_S
    ) -> PatroniNode:
        """A primary other than ``old`` (after ``old`` was killed or paused)."""

        def new() -> PatroniNode | None:
            found = [n for n in self.reachable() if n is not old and n.is_primary()]
            return found[0] if found else None

        return self.wait(f"a primary other than {old.name}", new, timeout_s)

    def streaming(self, primary: PatroniNode) -> list[tuple[str, str]]:
        """(application_name, sync_state) of each standby streaming from ``primary``."""
        with self.admin(primary) as conn:
            rows = conn.execute(
                "SELECT application_name, sync_state FROM pg_stat_replication "
                "WHERE state = 'streaming'"
            ).fetchall()
        return [(str(a), str(s)) for a, s in rows]

    def healthy(self) -> PatroniNode | None:
        """Every running node is in the cluster: one primary, every other streaming from
        it, one of them its synchronous standby (in the DCS and in pg_stat_replication)."""
        primary = self.primary()
        running = [n for n in self.reachable() if n is not primary]
        if primary is None or len(running) + 1 != len(
            [n for n in self.nodes if n.child.running()]
        ):
            return None
        try:
            streams = self.streaming(primary)
        except psycopg.Error:
            return None
        standby = self.sync_standby()
        if standby is None or (standby.name, "sync") not in streams:
            return None
        if {name for name, _ in streams} != {n.name for n in running}:
            return None
        return primary

    def wait_healthy(self, timeout_s: float = START_TIMEOUT_S) -> PatroniNode:
        """:meth:`healthy`, waited for; the primary."""
        return self.wait("every node streaming, one synchronous", self.healthy, timeout_s)

    # ------------------------------------------------------------------ connecting

    def url(self, database: str, *, connect_timeout_s: int = 2) -> str:
        """The link's multi-host URL: every node, ``target_session_attrs=read-write`` (libpq
        finds the primary), the ``progressived`` role's password from :attr:`passfile`.
        ``connect_timeout`` bounds each host's try (a paused node accepts TCP, answers
        nothing)."""
        hosts = ",".join(f"127.0.0.1:{n.pg_port}" for n in self.nodes)
        return (
            f"postgresql://{ROLE}@{hosts}/{database}?target_session_attrs=read-write"
            f"&connect_timeout={connect_timeout_s}&passfile={self.passfile}"
        )

    def admin(
        self, node: PatroniNode | None = None, database: str = "postgres"
    ) -> psycopg.Connection[tuple[Any, ...]]:
        """The superuser on ``node`` (default: the primary) over its Unix socket."""
        target = node or self.wait_for_primary()
        return psycopg.connect(
            host=str(target.sockets),
            port=target.pg_port,
            user="postgres",
            dbname=database,
            autocommit=True,
            connect_timeout=5,
        )

    def database(self, name: str | None = None) -> str:
        """A new empty database owned by ``progressived`` on the primary; its URL."""
        with self.admin() as conn:
            return self.url(create_database(conn, name))

    # ------------------------------------------------------------------ faults

    def kill(self, node: PatroniNode) -> None:
        """SIGKILL Patroni, its PostgreSQL and every backend at once (the machine is lost)."""
        node.kill()
        self.paused.discard(node.name)

    def pause(self, node: PatroniNode) -> None:
        """SIGSTOP the node's processes (a machine frozen: its sockets stay open)."""
        node.signal(signal.SIGSTOP)
        self.paused.add(node.name)

    def resume(self, node: PatroniNode) -> None:
        """SIGCONT a paused node (it wakes up believing what it believed before)."""
        node.signal(signal.SIGCONT)
        self.paused.discard(node.name)

    def wake_postgres(self, node: PatroniNode) -> None:
        """SIGCONT only a paused node's PostgreSQL: its Patroni stays frozen, so nothing
        demotes it -- what a client of that server sees then is up to PostgreSQL alone."""
        postmaster = node.postmaster_pid()
        if postmaster is not None:
            signal_all(list(reversed(tree(postmaster))), signal.SIGCONT)

    def restart(self, node: PatroniNode) -> None:
        """Start a killed node's Patroni again: it rejoins as a replica (pg_rewind)."""
        if node.child.running():
            return
        node.start()  # Patroni tells a stale postmaster.pid from a live server itself

    def close(self) -> None:
        """Every node stopped (SIGTERM, SIGKILL after a grace), then etcd; bounded."""
        for node in self.nodes:
            node.signal(signal.SIGCONT)
        stop_all([n.child for n in self.nodes])  # Patroni stops its PostgreSQL
        for node in self.nodes:
            node.kill()  # a postmaster that outlived its Patroni
        stop_all([m.child for m in self.etcd.members])


def _secrets() -> Secrets:
    return Secrets(
        secrets.token_urlsafe(18), secrets.token_urlsafe(18), secrets.token_urlsafe(18)
    )


@contextlib.contextmanager
def database_cluster(size: int = 3) -> Iterator[DatabaseCluster]:
    """3 etcd members and ``size`` (2 or 3) Patroni nodes, healthy (a primary and a
    synchronous standby, the ``progressived`` role made); everything stopped and removed
    at the end, however it ends."""
    if size not in (2, 3):
        raise ValueError("the rig runs 2 or 3 database nodes")
    if not rig_available():
        raise PostgresUnavailable(
            "the HA rig needs PostgreSQL 15, Patroni and etcd "
            "(Debian: apt-get install postgresql-15 patroni etcd-server)"
        )
    user = _os_user()
    root = Path(tempfile.mkdtemp(prefix="progressived-ha-"))
    root.chmod(0o755)
    etcd = EtcdCluster(root / "etcd")
    etcd.root.mkdir()
    keys = _secrets()
    nodes: list[PatroniNode] = []
    password = secrets.token_urlsafe(18)
    passfile = root / "pgpass"
    passfile.write_text(f"127.0.0.1:*:*:{ROLE}:{password}\n")
    passfile.chmod(0o600)
    cluster = DatabaseCluster(root, etcd, nodes, password, passfile)
    try:
        etcd.start()  # first: its ports are final once it runs
        for i in range(size):
            node_root = root / f"db{i + 1}"
            node_root.mkdir()
            nodes.append(PatroniNode(f"db{i + 1}", node_root, etcd.hosts, keys, user))
        for node in nodes:
            node.start()
        primary = cluster.wait_for_primary(START_TIMEOUT_S)
        with cluster.admin(primary) as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(ROLE), sql.Literal(password)
                )
            )
        cluster.wait_healthy()
        yield cluster
    finally:
        cluster.close()
        if os.environ.get("PROGRESSIVED_HA_KEEP"):
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


__all__ = ["ClusterTimeout", "DatabaseCluster", "database_cluster", "rig_available"]
