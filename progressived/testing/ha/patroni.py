"""One database node: Patroni and the PostgreSQL it runs, on loopback ports.

The node's configuration is written as JSON (JSON is YAML, which Patroni reads), from
:mod:`progressived.testing.ha.settings` (the synchronous settings and timings the shipped
``config/ha/patroni-*.yml`` carry too). PostgreSQL refuses to run as root, so under root
Patroni runs as the ``postgres`` user (as :mod:`progressived.testing.postgres` does). The
node is asked about its state through Patroni's REST API (``/patroni``, ``/primary``,
``/cluster``), never by parsing logs.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from progressived.testing.ha import settings
from progressived.testing.ha.process import Child, distinct_port, signal_all, tree
from progressived.testing.postgres import BIN

PATRONI = "patroni"  # Debian's patroni (it runs on the system's python3 and its psycopg2)
REST_TIMEOUT_S = 1.0  # a stopped node does not answer: its REST call gives up after this
REST_BODY_LIMIT = 1 << 20

# The rig's own additions to settings.PARAMETERS: small (a 2-core machine runs 3 nodes).
RIG_PARAMETERS: dict[str, object] = {
    "shared_buffers": "32MB",
    "max_connections": 50,
}


@dataclass(frozen=True)
class Secrets:
    """The passwords of the roles Patroni uses (random per rig)."""

    superuser: str
    replication: str
    rewind: str


@dataclass
class PatroniNode:
    name: str
    root: Path  # this node's directory (its configuration, data, sockets and log)
    etcd_hosts: list[str]
    secrets: Secrets
    user: str | None  # the OS user Patroni runs as (``postgres`` under root)
    pg_port: int = field(default_factory=distinct_port)
    rest_port: int = field(default_factory=distinct_port)
    child: Child = field(init=False)

    def __post_init__(self) -> None:
        self.child = Child(f"patroni {self.name}", self.root / "patroni.log")

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def sockets(self) -> Path:
        return self.root / "run"

    @property
    def config_file(self) -> Path:
        return self.root / "patroni.yml"

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def config(self) -> dict[str, Any]:
        """Patroni's configuration for this node (the shape of config/ha/patroni-db1.yml)."""
        address = f"127.0.0.1:{self.pg_port}"
        auth = {
            "superuser": {"username": settings.SUPERUSER, "password": self.secrets.superuser},
            "replication": {
                "username": settings.REPLICATION_USER,
                "password": self.secrets.replication,
            },
            "rewind": {"username": settings.REWIND_USER, "password": self.secrets.rewind},
        }
        parameters = {
            **settings.PARAMETERS,
            **RIG_PARAMETERS,
            "unix_socket_directories": str(self.sockets),
        }
        return {
            "scope": settings.SCOPE,
            "namespace": settings.NAMESPACE,
            "name": self.name,
            "log": {"level": "INFO"},
            "restapi": {"listen": f"127.0.0.1:{self.rest_port}",
                        "connect_address": f"127.0.0.1:{self.rest_port}"},
            "etcd": {"hosts": list(self.etcd_hosts), "protocol": "http"},
            "bootstrap": {
                "dcs": settings.DCS,
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}, "data-checksums"],
            },
            "postgresql": {
                "listen": address,
                "connect_address": address,
                "data_dir": str(self.data),
                "bin_dir": str(BIN),
                "pgpass": str(self.root / "pgpass"),
                "authentication": auth,
                "parameters": parameters,
                "pg_hba": [
                    "local all all trust",
                    "host replication replicator 127.0.0.1/32 scram-sha-256",
                    "host all all 127.0.0.1/32 scram-sha-256",
                ],
            },
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False,
                     "nosync": False},
        }  # fmt: skip

    def prepare(self) -> None:
        """The node's directory and configuration, owned by the user Patroni runs as."""
        self.sockets.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(json.dumps(self.config(), indent=2) + "\n")
        self.config_file.chmod(0o600)
        if self.user is not None:
            record = pwd.getpwnam(self.user)
            for path in (self.root, self.sockets, self.config_file):
                os.chown(path, record.pw_uid, record.pw_gid)
            if self.child.log.exists():
                os.chown(self.child.log, record.pw_uid, record.pw_gid)

    def start(self) -> None:
        """Start Patroni (it bootstraps, clones or rejoins by what it finds)."""
        self.prepare()
        uid = gid = None
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root),
               "LANG": "C.UTF-8"}  # fmt: skip
        if self.user is not None:
            record = pwd.getpwnam(self.user)
            uid, gid = record.pw_uid, record.pw_gid
        self.child.start([PATRONI, str(self.config_file)], uid=uid, gid=gid, env=env,
                         cwd=self.root)  # fmt: skip

    # ------------------------------------------------------------------ its processes

    def postmaster_pid(self) -> int | None:
        """The running postmaster of this node's data directory (not a stale pid file's
        number reused by another process)."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            return None
        return pid if str(self.data).encode() in cmdline else None

    def pids(self) -> list[int]:
        """Patroni, its postmaster and every PostgreSQL process: the whole node."""
        roots = [p for p in (self.child.pid, self.postmaster_pid()) if p is not None]
        return tree(*roots)

    def signal(self, signum: int) -> None:
        """``signum`` to every process of the node, PostgreSQL's children first (so none
        of them runs on after its parent stopped)."""
        signal_all(list(reversed(self.pids())), signum)

    def kill(self) -> None:
        """SIGKILL the whole node at once (Patroni cannot restart its PostgreSQL), then
        reap Patroni."""
        pids = self.pids()
        signal_all(pids, signal.SIGKILL)
        self.child.kill()

    # ------------------------------------------------------------------ asking it

    def rest(self, path: str) -> tuple[int, Any]:
        """``GET path`` of the REST API: (status, JSON body); (0, None) when it does not
        answer (killed, stopped, starting)."""
        try:
            with urllib.request.urlopen(self.rest_url + path, timeout=REST_TIMEOUT_S) as answer:
                return answer.status, json.loads(answer.read(REST_BODY_LIMIT) or b"null")
        except urllib.error.HTTPError as refused:
            try:
                body = json.loads(refused.read(REST_BODY_LIMIT) or b"null")
            except ValueError:
                body = None
            return refused.code, body
        except (OSError, ValueError):
            return 0, None

    def is_primary(self) -> bool:
        """Patroni says this node holds the leader key (``/primary``) **and** its
        PostgreSQL has left recovery: Patroni answers 200 as soon as it asked for the
        promotion, a moment before the server accepts a write."""
        status, _ = self.rest("/primary")
        return status == 200 and self.writable()

    def writable(self) -> bool:
        """The server answers and is not in recovery (asked over its Unix socket)."""
        try:
            with psycopg.connect(
                host=str(self.sockets), port=self.pg_port, user="postgres",
                dbname="postgres", connect_timeout=2, autocommit=True,
            ) as conn:  # fmt: skip
                row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        except psycopg.Error:
            return False
        return row is not None and row[0] is False

    def state(self) -> dict[str, Any] | None:
        status, body = self.rest("/patroni")
        return body if status == 200 and isinstance(body, dict) else None
