"""The whole HA link on one machine: the database cluster (3 etcd, 2-3 Patroni/PostgreSQL),
two brokers with the floor's accounts and ACL, and two ``progressived link`` controllers of
one link over the multi-host URL (one active, one fenced standby), all on loopback ports --
for the reliability suite, ``progressived demo --ha`` and ``bench.link_ha``.

Composed, not merged: :class:`~progressived.testing.ha.cluster.DatabaseCluster` keeps the
database faults; this adds the controllers' and brokers' (SIGKILL, SIGSTOP, SIGCONT, start
again) and the question every fault is followed by: which controller is active now.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from progressived.runtime.control import request
from progressived.testing.config import render_toml
from progressived.testing.ha.brokers import AclBroker, accounts_for, acl_for
from progressived.testing.ha.cluster import ClusterTimeout, DatabaseCluster, database_cluster
from progressived.testing.ha.process import Child, distinct_port
from progressived.testing.rig import PROGRESSIVED

LINK = "link-a"
METER = "main"
SIGNS = ("sign-lobby",)
LEASE_S = 10.0  # about one database failover (docs/link.md: a longer one fences the holder)
TAKEOVER_TIMEOUT_S = 90.0
POLL_S = 0.05


@dataclass
class LinkProcess:
    """One ``progressived link`` (its own folder: configuration, control socket, log)."""

    holder: str
    folder: Path
    config: Path
    child: Child
    metrics_port: int
    paused: bool = False

    def start(self) -> None:
        self.paused = False
        self.child.start([*PROGRESSIVED, "link", "--config", str(self.config)])

    def running(self) -> bool:
        return self.child.running()

    def status(self) -> dict[str, Any] | None:
        """The control socket's status; None while it does not answer (down, paused)."""
        if self.paused or not self.running():
            return None
        return control_status(self.folder / "link.sock")

    def role(self) -> str | None:
        status = self.status()
        return None if status is None else str(status.get("role"))

    def kill(self) -> None:
        """SIGKILL (its machine is lost): no lease released, no session closed."""
        self.child.kill()
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: it holds its sockets and believes it still holds the lease."""
        self.child.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.child.signal(signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        self.child.stop()
        self.paused = False


@dataclass
class HaLink:
    """A running HA link (made by :func:`ha_link`)."""

    root: Path
    db: DatabaseCluster
    url: str  # the link ledger's multi-host URL (no password in it)
    tables: list[str]
    passwords: dict[str, str]  # account -> password (tables, the link, signs)
    brokers: list[AclBroker]
    controllers: list[LinkProcess] = field(default_factory=list)
    meter: str = METER
    lease_s: float = LEASE_S

    # ------------------------------------------------------------------ questions

    @property
    def hosts(self) -> list[str]:
        """``[mqtt] hosts`` for a table, a sign or a controller: both brokers, in order."""
        return [b.address for b in self.brokers]

    def password_file(self, account: str) -> Path:
        """A file holding ``account``'s broker password (``[mqtt] password_file``)."""
        path = self.root / "secrets" / f"{account}.pw"
        if not path.exists():
            path.parent.mkdir(exist_ok=True)
            path.write_text(self.passwords[account] + "\n")
            path.chmod(0o600)
        return path

    def active(self) -> LinkProcess | None:
        """The controller that says ``active`` (None during a takeover)."""
        found = [c for c in self.controllers if c.role() == "active"]
        return found[0] if len(found) == 1 else None

    def standby(self) -> LinkProcess | None:
        found = [c for c in self.controllers if c.role() == "standby"]
        return found[0] if len(found) == 1 else None

    def other(self, controller: LinkProcess) -> LinkProcess:
        return next(c for c in self.controllers if c is not controller)

    def wait_active(
        self, timeout_s: float = TAKEOVER_TIMEOUT_S, *, not_: LinkProcess | None = None
    ) -> LinkProcess:
        """The active controller (other than ``not_``), waited for; ClusterTimeout with the
        controllers' log tails after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.active()
            if found is not None and found is not not_:
                return found
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {c.holder}\n{c.child.tail(1500)}" for c in self.controllers)
                raise ClusterTimeout(f"no active link controller in {timeout_s:.0f} s\n{tails}")
            time.sleep(POLL_S)

    def wait_role(self, controller: LinkProcess, role: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while controller.role() != role:
            if time.monotonic() > deadline:
                raise ClusterTimeout(
                    f"{controller.holder} not {role} in {timeout_s:.0f} s\n"
                    f"{controller.child.tail(1500)}"
                )
            time.sleep(POLL_S)

    # ------------------------------------------------------------------ faults

    def kill_broker(self, broker: AclBroker) -> None:
        broker.kill()

    def start_broker(self, broker: AclBroker) -> None:
        """Start a killed broker again on its port (its store restored from disk)."""
        if not broker.running():
            broker.start()

    def reconcile(self, table_dbs: Sequence[Path]) -> tuple[int, dict[str, Any]]:
        """``progressivectl link reconcile --json`` of the link ledger (read from the
        primary) with ``table_dbs``: its exit status and report."""
        from progressived.testing.rig import PROGRESSIVECTL  # noqa: PLC0415

        cmd = [*PROGRESSIVECTL, "link", "reconcile", "--link-db", self.ledger_url(), "--json"]
        for path in table_dbs:
            cmd += ["--table-db", str(path)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
        try:
            report = json.loads(done.stdout)
        except ValueError:
            report = {"error": (done.stderr or done.stdout).strip()}
        return done.returncode, report

    def ledger_url(self) -> str:
        """The link ledger's URL for a reader outside the controllers (the password file
        named in it, as libpq's ``passfile``)."""
        return f"{self.url}&passfile={self.db.passfile}"

    def close(self) -> None:
        for c in self.controllers:
            c.stop()
        for b in self.brokers:
            b.stop()


def _controller(link: HaLink, name: str) -> LinkProcess:
    folder = link.root / name
    folder.mkdir()
    metrics_port = distinct_port()
    db_password = folder / "db.pw"
    db_password.write_text(link.db.password + "\n")
    db_password.chmod(0o600)
    text = render_toml(
        {
            "link": {"id": LINK, "tables": "@TABLES@", "heartbeat_s": 0.5},
            "link.meters": [
                {"id": link.meter, "paytable": "pmg-01", "rate": 0.15, "reserve_rate": 0.02}
            ],
            "mqtt": {
                "hosts": "@HOSTS@",
                "username": LINK,
                "password_file": link.password_file(LINK),
                "reconnect_initial_s": 0.2,
                "reconnect_max_s": 1.0,
            },
            "ledger": {
                "url": link.url,
                "password_file": db_password,
                "lease_s": link.lease_s,
                "holder": name,
            },
            "metrics": {"port": metrics_port},
            "control": {"socket": folder / "link.sock"},
            "log": {"format": "json"},
        },
        f"# the HA rig's link controller {name} (progressived/testing/ha/link.py)",
    )
    config = folder / "link.toml"
    config.write_text(
        text.replace('"@TABLES@"', json.dumps(link.tables)).replace(
            '"@HOSTS@"', json.dumps(link.hosts)
        )
    )
    return LinkProcess(name, folder, config, Child(name, folder / "link.log"), metrics_port)


@contextlib.contextmanager
def ha_link(
    tables: Sequence[str],
    *,
    databases: int = 3,
    lease_s: float = LEASE_S,
    meter: str = METER,
) -> Iterator[HaLink]:
    """The whole rig, healthy: ``databases`` Patroni nodes (2 or 3) over 3 etcd members, two
    brokers, the link ledger made (``progressived init``) and two controllers, ``ctl-a``
    active and ``ctl-b`` standby. Everything stopped at the end, however it ends."""
    with database_cluster(databases) as db:
        url = db.database("link_a").split("&passfile=", 1)[0]
        accounts = accounts_for(LINK, tables, SIGNS)
        acl = acl_for(LINK, tables, SIGNS)
        brokers = [
            AclBroker(port=distinct_port(), accounts=accounts, acl=acl) for _ in range(2)
        ]
        link = HaLink(db.root, db, url, list(tables), accounts, brokers, [], meter, lease_s)
        try:
            for broker in brokers:
                broker.start()
            link.controllers = [_controller(link, "ctl-a"), _controller(link, "ctl-b")]
            first, second = link.controllers
            done = subprocess.run(
                [*PROGRESSIVED, "init", "--config", str(first.config), "--operator", "ha-rig"],
                capture_output=True,
                text=True,
                check=False,
                timeout=120,
            )
            if done.returncode != 0:
                raise RuntimeError(f"progressived init of the link failed: {done.stderr}")
            first.start()
            link.wait_role(first, "active")
            second.start()
            link.wait_role(second, "standby")
            yield link
        finally:
            link.close()
            for broker in brokers:
                shutil.rmtree(broker.workdir, ignore_errors=True)


__all__ = ["LINK", "METER", "SIGNS", "HaLink", "LinkProcess", "ha_link"]


def control_status(socket: Path) -> dict[str, Any] | None:
    """A controller's status over its control socket (None while it does not answer)."""
    try:
        answer = request(socket, {"action": "status"}, timeout=2)
    except (OSError, ValueError):
        return None
    status = answer.get("status")
    return status if isinstance(status, dict) else None
