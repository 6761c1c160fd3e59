"""Three etcd members on loopback ports: the DCS Patroni keeps its leader key in.

Patroni talks to etcd through its **v2 API** (Patroni's ``etcd:`` section), so each member
runs with ``--enable-v2=true`` (etcd 3.4 serves v2 only when asked). Why v2, not Patroni's
``etcd3:`` client: docs/ha.md, "Patroni and etcd". Three members keep a quorum when one is
lost.
"""

from __future__ import annotations

import json
import secrets
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from progressived.testing.ha.process import Child
from progressived.testing.postgres import free_port

ETCD = "etcd"  # Debian's etcd-server
START_TIMEOUT_S = 30.0


@dataclass
class EtcdMember:
    name: str
    root: Path
    client_port: int = field(default_factory=free_port)
    peer_port: int = field(default_factory=free_port)
    child: Child = field(init=False)

    def __post_init__(self) -> None:
        self.child = Child(f"etcd {self.name}", self.root / f"{self.name}.log")

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def argv(self, initial_cluster: str, token: str, state: str) -> list[str]:
        return [
            ETCD,
            "--name", self.name,
            "--data-dir", str(self.root / f"{self.name}.etcd"),
            "--listen-client-urls", self.client_url,
            "--advertise-client-urls", self.client_url,
            "--listen-peer-urls", self.peer_url,
            "--initial-advertise-peer-urls", self.peer_url,
            "--initial-cluster", initial_cluster,
            "--initial-cluster-token", token,
            "--initial-cluster-state", state,
            "--enable-v2=true",
            "--logger=zap",
            "--log-outputs=stderr",
        ]  # fmt: skip

    def healthy(self) -> bool:
        """The member answers ``/health`` with ``"health": "true"`` (it has a leader)."""
        try:
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=1.0) as answer:
                body = json.loads(answer.read(4096))
        except (OSError, ValueError, urllib.error.URLError):
            return False
        return isinstance(body, dict) and body.get("health") in ("true", True)


@dataclass
class EtcdCluster:
    """Three members; :meth:`start` returns once each answers healthy."""

    root: Path
    size: int = 3
    members: list[EtcdMember] = field(default_factory=list)
    token: str = field(default_factory=lambda: f"progressived-{secrets.token_hex(4)}")

    def __post_init__(self) -> None:
        if not self.members:
            self.members = [EtcdMember(f"etcd{i + 1}", self.root) for i in range(self.size)]

    @property
    def hosts(self) -> list[str]:
        """``host:port`` of each member's client API (Patroni's ``etcd.hosts``)."""
        return [f"127.0.0.1:{m.client_port}" for m in self.members]

    def initial_cluster(self) -> str:
        return ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        for member in self.members:
            member.child.start(member.argv(self.initial_cluster(), self.token, "new"))
        deadline = time.monotonic() + timeout_s
        for member in self.members:
            while not member.healthy():
                if not member.child.running():
                    raise RuntimeError(f"{member.child.name} exited:\n{member.child.tail()}")
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{member.child.name} not healthy in {timeout_s:.0f} s:\n"
                        f"{member.child.tail()}"
                    )
                time.sleep(0.1)

    def stop(self) -> None:
        for member in self.members:
            member.child.stop()
