"""A child process of the rig: its output in a log file, a stop that is bounded (SIGTERM, then
SIGKILL after a grace period), and signals that reach every process it started.

Why a process group is not enough: Patroni starts its postmaster detached (``setsid`` in an
intermediate process that exits), and every PostgreSQL child calls ``setsid`` too. So "the
machine" is found as process trees (:func:`tree`, by parent pid in ``/proc``): Patroni's, and
the postmaster's (its pid from ``postmaster.pid``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from progressived.testing.postgres import free_port

STOP_GRACE_S = 10.0  # SIGTERM, then SIGKILL after this long

_HANDED_OUT: set[int] = set()


def distinct_port() -> int:
    """A free loopback port not handed out before in this process (the rig takes a dozen at
    once: two of them must never be the same)."""
    for _ in range(1000):
        if (port := free_port()) not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no free loopback port left that the rig has not used already")


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (Linux ``/proc``)."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2 :].split()
        found[int(entry.name)] = int(fields[1])
    return found


def tree(*roots: int) -> list[int]:
    """``roots`` and all their descendants, parents before children."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    order: list[int] = []
    todo = [r for r in roots if r in parents]
    while todo:
        pid = todo.pop(0)
        if pid in order:
            continue
        order.append(pid)
        todo.extend(children.get(pid, []))
    return order


def signal_all(pids: Sequence[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


@dataclass
class Child:
    """One started program; ``None`` until started, and again after it was reaped."""

    name: str
    log: Path
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(
        self,
        argv: list[str],
        *,
        uid: int | None = None,
        gid: int | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        if self.running():
            raise RuntimeError(f"{self.name} is already running")
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a process group of its own: signal() reaches all
                user=uid,
                group=gid,
                env=dict(env) if env is not None else None,
                cwd=cwd,
            )

    @property
    def pid(self) -> int | None:
        return None if self.popen is None else self.popen.pid

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, signum: int) -> None:
        """``signum`` to the program and every process it started that is still its own."""
        if self.popen is not None:
            signal_all(tree(self.popen.pid), signum)

    def kill(self) -> None:
        """SIGKILL to the program and its descendants, then reap it."""
        if self.popen is None:
            return
        self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(STOP_GRACE_S)
        self.popen = None

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM (a clean shutdown), SIGKILL to the group after ``grace_s``; bounded."""
        if self.popen is None:
            return
        self.signal(signal.SIGCONT)
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(grace_s)
        self.kill()  # whatever of the group is left (a postmaster outliving Patroni)

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""


def stop_all(children: Sequence[Child], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to each at once, one shared grace period, then SIGKILL to what is left: a
    teardown bounded by ``grace_s`` however many there are."""
    for child in children:
        child.signal(signal.SIGCONT)
        if child.popen is not None:
            with contextlib.suppress(ProcessLookupError):
                child.popen.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for child in children:
        if child.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.popen.wait(max(0.0, deadline - time.monotonic()))
        child.kill()
