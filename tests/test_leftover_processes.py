"""The leftover check (tests/processes.py, conftest's ``no_leftover_processes``) finds what
a test leaves running: a child, and a grandchild whose parent exited first."""

from __future__ import annotations

import subprocess

import psutil
import pytest

from progressived.testing.waits import until_sync
from tests.processes import become_subreaper, descendants, leftovers

pytestmark = pytest.mark.e2e  # child processes left running on purpose (pyproject.toml's markers)


def test_a_child_left_running_is_found_and_killed() -> None:
    before = set(descendants())
    child = subprocess.Popen(["sleep", "60"])
    found = leftovers(before)
    assert len(found) == 1 and f"pid {child.pid}: sleep 60" in found[0]
    assert not psutil.pid_exists(child.pid)  # killed and reaped


def test_an_orphaned_grandchild_is_adopted_found_and_killed() -> None:
    assert become_subreaper()
    try:
        before = set(descendants())
        shell = subprocess.run(
            ["sh", "-c", "sleep 61 >/dev/null 2>&1 & echo $!"],
            capture_output=True, text=True, check=True, timeout=10,
        )
        orphan = int(shell.stdout)
        assert psutil.Process(orphan).ppid() == psutil.Process().pid  # adopted, not init's
        found = leftovers(before)
    finally:
        become_subreaper(False)
    assert [f"pid {orphan}: sleep 61"] == found
    assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == "zombie"


def test_a_process_that_ends_within_the_grace_is_not_a_leftover() -> None:
    before = set(descendants())
    subprocess.Popen(["sleep", "0.3"])
    assert leftovers(before) == []


def test_a_child_of_a_process_older_than_the_test_is_its_starters() -> None:
    """A server started by a wider-scoped fixture (the session's PostgreSQL) forks workers
    during a test; they are the server's to end, not leftovers of the test."""
    server = subprocess.Popen(
        ["sh", "-c", "while read line; do sleep 62 & done; wait"], stdin=subprocess.PIPE, text=True
    )
    try:
        before = set(descendants())
        assert server.stdin is not None
        server.stdin.write("fork\n")
        server.stdin.flush()
        until_sync(
            lambda: any(p.cmdline() == ["sleep", "62"] for p in descendants().values()),
            "the server's worker",
            10,
        )
        assert leftovers(before) == []
    finally:
        for proc in psutil.Process(server.pid).children(recursive=True):
            proc.kill()
        server.kill()
        server.wait(timeout=10)
