"""Three etcd members on loopback ports: the DCS Patroni keeps its leader key in.

Patroni talks to etcd through its **v2 API** (Patroni's ``etcd:`` section), so each member
runs with ``--enable-v2=true`` (etcd 3.4 serves v2 only when asked). Why v2, not Patroni's
``etcd3:`` client: docs/ha.md, "Patroni and etcd". Three members keep a quorum when one is
lost.
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from progressived.testing.ha.process import Child, distinct_port, stop_all

ETCD = "etcd"  # Debian's etcd-server
START_TIMEOUT_S = 30.0
START_TRIES = 3


class EtcdExited(RuntimeError):
    """A member exited while starting (a port taken, a bad flag): the message has its log."""


@dataclass
class EtcdMember:
    name: str
    root: Path
    client_port: int = field(default_factory=distinct_port)
    peer_port: int = field(default_factory=distinct_port)
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
        """Start the members; a member that exits at once (its port taken meanwhile by
        another program) makes all start again on new ports, up to :data:`START_TRIES`."""
        for attempt in range(START_TRIES):
            try:
                self._start(timeout_s)
                return
            except EtcdExited:
                stop_all([m.child for m in self.members])
                if attempt == START_TRIES - 1:
                    raise
                for member in self.members:
                    shutil.rmtree(self.root / f"{member.name}.etcd", ignore_errors=True)
                    member.client_port, member.peer_port = distinct_port(), distinct_port()

    def _start(self, timeout_s: float) -> None:
        for member in self.members:
            member.child.start(member.argv(self.initial_cluster(), self.token, "new"))
        deadline = time.monotonic() + timeout_s
        for member in self.members:
            while not member.healthy():
                if not member.child.running():
                    raise EtcdExited(f"{member.child.name} exited:\n{member.child.tail()}")
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{member.child.name} not healthy in {timeout_s:.0f} s:\n"
                        f"{member.child.tail()}"
                    )
                time.sleep(0.1)

    def stop(self) -> None:
        for member in self.members:
            member.child.stop()
