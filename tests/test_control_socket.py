"""The control socket of the running daemon: operator actions, refusals, the group check."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from progressived.runtime.control import request
from tests.daemon_harness import table
from tests.test_cli_faults import CTL, closed_pipe_run

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)

NOBODY = 65534


def ctl(socket: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "progressived.cli.ctl", *args, "--socket", str(socket)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def as_nobody(socket: Path) -> str:
    """Connect from a child process running as nobody; returns what happened."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, try the socket, report, exit
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            result = json.dumps(request(socket, {"action": "status"}, timeout=10))
        except PermissionError as exc:
            result = f"PermissionError {exc}"
        except Exception as exc:
            result = f"error: {exc!r}"
        os.write(write, result.encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


def journal(db: Path, kind: str) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT actor, data FROM journal WHERE kind = ? ORDER BY seq", (kind,)
        ).fetchall()
    return [{"actor": actor, **json.loads(data)} for actor, data in rows]


async def test_operator_actions_through_the_control_socket(tmp_path: Path) -> None:
    # The socket lives in a directory anyone may traverse (like /run/progressived), so that
    # it is the socket's own group permission, then the daemon's check, that refuse.
    run_dir = Path(tempfile.mkdtemp(prefix="progressived-run-"))
    run_dir.chmod(0o755)
    sock = run_dir / "control.sock"
    async with table(tmp_path) as t:
        old = f'socket = "{tmp_path / "control.sock"}"'
        assert old in t.config.read_text()
        t.config.write_text(
            t.config.read_text().replace(old, f'socket = "{sock}"\ngroup = "dialout"')
        )
        t.start_daemon()
        await t.online()
        status = await asyncio.to_thread(ctl, sock, "status")
        assert status.returncode == 0, status.stderr
        assert "table it-1  paytable tcp-sd-1" in status.stdout
        assert "meter main: $1,000.00 (open)" in status.stdout
        assert "board: online" in status.stdout
        # `progressivectl status | head` with the reader gone: silent, exit 141.
        piped = await asyncio.to_thread(closed_pipe_run, *CTL, "status", "--socket", str(sock))
        assert piped.returncode == 141
        assert piped.stderr == ""

        # Closing needs who and why; a closed table refuses LOCK; reopening allows it.
        refused = await asyncio.to_thread(ctl, sock, "close", "--operator", "", "--reason", "x")
        assert refused.returncode == 1
        closed = await asyncio.to_thread(
            ctl, sock, "close", "--operator", "ops-7", "--reason", "table games closed the pit"
        )
        assert closed.returncode == 0, closed.stderr
        # Text for a person by default (JSON only with --json).
        assert closed.stdout.startswith("progressive closed; closed for: "), closed.stdout
        assert "operator" in closed.stdout
        await t.bets(1)
        await t.press("LOCK")
        rejected = await t.sub.wait_event("command_rejected")
        assert "closed" in rejected["reason"]
        assert (
            await asyncio.to_thread(
                ctl, sock, "open", "--operator", "ops-7", "--reason", "pit open"
            )
        ).returncode == 0
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")

        # Parameters cannot change mid-round, and need a second person.
        t.config.write_text(t.config.read_text().replace("rate = 0.15", "rate = 0.20"))
        mid = await asyncio.to_thread(
            ctl,
            sock,
            "params-reload",
            "--operator",
            "ops-7",
            "--approver",
            "sup-2",
            "--reason",
            "new rate",
        )
        assert mid.returncode == 1
        assert "refused while a round is open" in mid.stderr
        await t.collect(1)
        await t.press("RECON")
        await t.sub.wait_event("round_reconciled")
        alone = await asyncio.to_thread(
            ctl,
            sock,
            "params-reload",
            "--operator",
            "ops-7",
            "--approver",
            "ops-7",
            "--reason",
            "new rate",
        )
        assert "second person" in alone.stderr
        ok = await asyncio.to_thread(
            ctl,
            sock,
            "params-reload",
            "--operator",
            "ops-7",
            "--approver",
            "sup-2",
            "--reason",
            "new rate",
            "--json",
        )
        assert ok.returncode == 0, ok.stderr
        assert json.loads(ok.stdout)["changes"]["meters.main.rate"] == {"old": "3/20", "new": "1/5"}

        # A documented meter correction, approved by a second person.
        adj = await asyncio.to_thread(
            ctl,
            sock,
            "meter-adjust",
            "main",
            "-0.15",
            "--operator",
            "ops-7",
            "--approver",
            "sup-2",
            "--reason",
            "sign showed 15c high after a board fault, ticket 42",
        )
        assert adj.returncode == 0, adj.stderr
        assert adj.stdout.splitlines()[0] == "done (journaled)", adj.stdout
        assert adj.stdout.splitlines()[1].startswith("meter main: $1,000.00 (open), reserve $")
        status = await asyncio.to_thread(ctl, sock, "status", "--json")
        assert json.loads(status.stdout)["status"]["meters"]["main"]["cents"] == 100_000
        assert "link" not in json.loads(status.stdout)["status"]  # a single table: no link

        # The wrong group: the OS refuses the socket; with the file opened up, the daemon does.
        assert (await asyncio.to_thread(as_nobody, sock)).startswith("PermissionError")
        os.chmod(sock, 0o666)
        answer = await asyncio.to_thread(as_nobody, sock)
        assert '"ok": false' in answer
        assert "not in group dialout" in answer
        # The signs were told of each (and `table` checks every message against docs/mqtt.md).
        for kind in ("operator_close", "operator_open", "parameter_changed", "control_refused"):
            await t.sub.wait_event(kind)

    db = tmp_path / "ledger.db"
    assert [r["operator"] for r in journal(db, "operator_close")] == ["ops-7"]
    assert journal(db, "operator_close")[0]["reason"] == "table games closed the pit"
    changed = journal(db, "parameter_changed")
    assert len(changed) == 1
    assert (changed[0]["operator"], changed[0]["approver"]) == ("ops-7", "sup-2")
    adjusted = journal(db, "meter_adjusted")
    assert adjusted[0]["units"] == -150_000
    assert adjusted[0]["approved_by"] == "sup-2"
    assert journal(db, "control_refused")[0]["uid"] == NOBODY
    verify = subprocess.run(
        [sys.executable, "-m", "progressived.cli.ctl", "ledger", "verify", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
