"""Every process a test starts ends with it: the check behind conftest's ``no_leftovers``.

After each test, a descendant of the test process (a child, or a child's child while its
parent lives; ``become_subreaper`` can adopt orphans too, and its test shows it) that
did not exist before it and still runs (after a bounded grace for ones already stopping)
is killed and fails the test, named with its command line. A process started by one that
existed before the test (a backend of the session's PostgreSQL) is its starter's to end.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from collections.abc import Iterable

import psutil

PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 5.0  # a process signalled at the end of a test may take this long to exit


def become_subreaper(on: bool = True) -> bool:
    """Adopt orphaned descendants, or stop (Linux only); whether it worked. Not on for the
    whole suite: an adopted orphan that exits stays a zombie until reaped, and a zombie
    postmaster looks alive to Patroni and pg_ctl, so tests that SIGKILL a parent need init
    to reap its orphans."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def descendants(reap_new: Iterable[int] | None = None) -> dict[int, psutil.Process]:
    """This process's descendants that still run. Zombies are not counted; those not in
    ``reap_new`` (the pids before a test) are reaped: exited, and nobody left to wait."""
    known = None if reap_new is None else set(reap_new)
    found: dict[int, psutil.Process] = {}
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                if known is not None and proc.pid not in known:
                    reap(proc.pid)
                continue
        except psutil.NoSuchProcess:
            continue
        found[proc.pid] = proc
    return found


def reap(pid: int) -> None:
    """Collect an exited child's status; nothing if it is someone else's to collect."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _under(proc: psutil.Process, known: set[int]) -> bool:
    """Whether ``proc`` was started by a process that existed before the test (the
    session's PostgreSQL forking a backend): that process's owner answers for it."""
    me = os.getpid()
    try:
        parent = proc.ppid()
        while parent not in (me, 0, 1):
            if parent in known:
                return True
            parent = psutil.Process(parent).ppid()
    except psutil.Error:
        return False
    return False


def describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid}: {' '.join(proc.cmdline())[:200] or proc.name()}"
    except psutil.Error:
        return f"pid {proc.pid}: (gone)"


def leftovers(before: Iterable[int]) -> list[str]:
    """The descendants started since ``before`` that still run after the grace: each is
    killed (SIGKILL, its group spared: only what this process started) and described."""
    known = set(before)
    running = descendants(known)
    new = [p for pid, p in running.items() if pid not in known and not _under(p, known)]
    if not new:
        return []
    _, alive = psutil.wait_procs(new, timeout=GRACE_S)
    found = []
    for proc in alive:
        found.append(describe(proc))
        try:
            proc.kill()
            proc.wait(timeout=GRACE_S)
        except psutil.NoSuchProcess:
            pass
        except psutil.TimeoutExpired:
            found[-1] += " (survived SIGKILL)"
        reap(proc.pid)
    return found
