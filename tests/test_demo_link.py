"""``progressived demo --tables N``: a linked meter across real processes, end to end — the
link controller, N table daemons, their boards, two royal flushes moments apart, a link
outage — judged by the reconciliation it ends with (``--headless``); and, on a real
terminal, what a person gets: where everything is, the web sign, typed commands reaching
the chosen table's board, Ctrl-C stopping everything."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path

import pytest

from progressived.demo.link import DemoTable, Process
from progressived.demo.link_console import Console
from progressived.testing.board import simulator
from progressived.testing.waits import WaitTimeout, until_sync

DEMO = [sys.executable, "-m", "progressived.cli.daemon", "demo"]
UNITS_PER_CENT = 10_000


@pytest.mark.e2e
def test_linked_demo_plays_and_reconciles_with_no_difference(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*DEMO, "--tables", "3", "--headless", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = proc.stdout
    # The two royals, ordered by the link: the first takes the meter, the second the reset one.
    first = out.index("LINKED METER  hit at pmg-01 seat 3: royal-flush")
    second = out.index("LINKED METER  hit at pmg-02 seat 5: royal-flush")
    assert first < second
    assert "pmg-01  CLOSED (link-down)" in out and "pmg-01  open again (link-down)" in out
    assert "pmg-03  seat 7 straight-flush: supervisor confirmed" in out
    report = json.loads(out[out.index("{\n") : out.rindex("}") + 1])
    assert report["differences"] == [] and report["in_flight"] == []
    assert set(report["tables"]) == {"pmg-01", "pmg-02", "pmg-03"}
    assert out.rstrip().endswith("no differences")
    # Both royals were paid from the link's ledger, in its log order, and the amounts the
    # tables journaled are the link's.
    link = sqlite3.connect(tmp_path / "link.db")
    paid = link.execute(
        "SELECT units FROM balances WHERE account = 'paid_attendant:main'"
    ).fetchone()[0]
    link.close()
    confirmed = 0
    for table in ("pmg-01", "pmg-02", "pmg-03"):
        db = sqlite3.connect(tmp_path / table / "ledger.db")
        for (data,) in db.execute("SELECT data FROM journal WHERE kind = 'award_confirmed'"):
            confirmed += json.loads(data)["units"]
        db.close()
    assert confirmed == paid > 2_000 * 100 * UNITS_PER_CENT


@pytest.mark.e2e
def test_tables_wants_two_or_more() -> None:
    proc = subprocess.run([*DEMO, "--tables", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "progressived demo: --tables wants N >= 2 (1 is the single table)"


class Terminal:
    """A real pseudo-terminal the command runs on, as its controlling terminal (so Ctrl-C
    is the terminal's SIGINT to its whole process group)."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        self.master = master
        # setsid(1): a new session whose controlling terminal is the pty on its stdin.
        self.proc = subprocess.Popen(
            ["setsid", "--ctty", "--wait", *cmd],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
        )
        os.close(slave)
        self.chunks: list[bytes] = []
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return  # EIO: the command closed the terminal
            if not data:
                return
            self.chunks.append(data)

    def seen(self) -> str:
        return b"".join(self.chunks).decode(errors="replace")

    def wait_for(self, pattern: str, after: int = 0, timeout: float = 180) -> re.Match[str]:
        """The first match of ``pattern`` in what was shown after offset ``after``."""

        def found() -> re.Match[str] | None:
            match = re.search(pattern, self.seen()[after:])
            assert match or self.proc.poll() is None, f"exited: {self.seen()[-3000:]}"
            return match

        try:
            return until_sync(found, repr(pattern), timeout, every=0.1)
        except WaitTimeout:
            raise AssertionError(f"no {pattern!r} on the terminal: {self.seen()[-3000:]}") from None

    def type(self, text: str) -> int:
        """Type ``text``; returns the output offset before it, to look for its answer."""
        offset = len(self.seen())
        os.write(self.master, text.encode())
        return offset

    def answer(self, prompt: str, line: str, pattern: str) -> re.Match[str]:
        """Type ``line`` at ``prompt``; ``pattern`` in a console line under its echo.

        The screen is redrawn in place, each frame with the console's history, so a line
        counts as an answer only below the typed line's echo in the same frame."""
        at = self.type(line + "\n")
        echo = re.escape(f"{prompt}{line}") + r"\r\n(?:[^\x1b\n]*\n)*?[^\x1b\n]*?"
        return self.wait_for(echo + pattern, at)


def descendants(pid: int) -> dict[int, bytes]:
    """Every process below ``pid``, with its command line."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: dict[int, bytes] = {}
    todo = [pid]
    while todo:
        parent = todo.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in found:
                try:
                    found[child] = Path(f"/proc/{child}/cmdline").read_bytes()
                except OSError:
                    continue
                todo.append(child)
    return found


def _still_running(processes: dict[int, bytes]) -> list[bytes]:
    left = []
    for pid, cmdline in processes.items():
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == cmdline:
                left.append(cmdline)
        except OSError:
            continue
    return left


def _status(socket: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "progressived.cli.ctl", "status", "--socket", socket, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads(done.stdout)["status"]
    assert isinstance(status, dict)
    return status


@pytest.mark.e2e
@pytest.mark.timeout(420)
def test_on_a_terminal_it_shows_where_everything_is_takes_typed_commands_and_ctrl_c_stops_it() -> (
    None
):
    # A short temporary directory: a control socket's path holds 107 bytes at most.
    short = Path(tempfile.mkdtemp(prefix="pdl-", dir="/tmp"))
    env = {**os.environ, "TMPDIR": str(short), "COLUMNS": "160", "LINES": "80"}
    term = Terminal([*DEMO, "--tables", "2"], env)
    try:
        # Where everything is, before the script plays.
        web = term.wait_for(r"web sign    (http://127\.0\.0\.1:\d+)/  \(link link-a").group(1)
        work = Path(term.wait_for(r"files       (\S+) \(removed at exit\)").group(1))
        assert work.parent == short
        banner = term.seen()
        for line in (
            f"link        progressived link --config {work / 'link.toml'}",
            f"  control   {work / 'link.sock'}  (progressivectl status --socket",
            f"table 2     pmg-02: progressived run --config {work / 'pmg-02'}",
            f"  control   {work / 'pmg-02' / 'control.sock'}",
            f"  ledger    {work / 'pmg-02' / 'ledger.db'}",
            f"  web sign  {web}/table/pmg-02",
        ):
            assert line in banner, banner
        assert re.search(r"  metrics   http://127\.0\.0\.1:\d+/metrics", banner)
        # The web sign answers: the link's panel and the tables' pages.
        with urllib.request.urlopen(f"{web}/table/pmg-02", timeout=30) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
        # The script plays, then the typing starts at the first table's board.
        term.wait_for(r"no differences", timeout=300)
        term.wait_for(r"Ctrl-C stops\r\npmg-01> ")
        with urllib.request.urlopen(f"{web}/state.json", timeout=30) as state:
            sources = json.dumps(json.loads(state.read())["sources"])
        assert "link/link-a" in sources and "table/pmg-02" in sources, sources
        term.answer("pmg-01> ", "table 9", r"usage: table N \(1\.\.2\) or table ID")
        term.answer("pmg-01> ", "table 2", r"typing at pmg-02's board")
        term.answer("pmg-02> ", "bet 3", r"pmg-02 board: lights 1=idle 2=idle 3=bet")
        locked = int(term.answer("pmg-02> ", "key LOCK", r"pmg-02  round (\d+) locked").group(1))
        term.answer("pmg-02> ", "frobnicate", r"pmg-02 board error: unknown command 'frobnicate'")
        # The typed bet reached pmg-02, and only pmg-02.
        chosen = _status(str(work / "pmg-02" / "control.sock"))
        assert (chosen["round"], chosen["locked_seats"]) == (locked, [3]), chosen
        other = _status(str(work / "pmg-01" / "control.sock"))
        assert other["locked_seats"] != [3], other
        running = descendants(term.proc.pid)
        assert sum(b"progressived" in c for c in running.values()) >= 3, running  # link, tables
        term.type("\x03")  # Ctrl-C
        assert term.proc.wait(timeout=120) == 130, term.seen()[-3000:]
    finally:
        if term.proc.poll() is None:  # the test failed first: stop it all as Ctrl-C does
            os.killpg(term.proc.pid, signal.SIGINT)
            try:
                term.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(term.proc.pid, signal.SIGKILL)
                term.proc.wait()
        os.close(term.master)
        shutil.rmtree(short, ignore_errors=True)
    term.reader.join(timeout=5)
    out = term.seen()
    assert "progressived demo: interrupted: stopping" in out
    assert f"removed the demo's files in {work}" in out and not work.exists()
    assert "Traceback" not in out
    assert _still_running(running) == [], "processes left behind"


async def test_the_console_chooses_a_table_and_types_at_its_real_board(tmp_path: Path) -> None:
    boards = [simulator(tmp_path / f"board-{n}", seats=7) for n in (1, 2)]
    for board in boards:
        await board.start()
    try:
        tables = [
            DemoTable(
                f"pmg-0{n}",
                tmp_path,
                tmp_path / "x.toml",
                board,
                Process("x", [], tmp_path / "x.log"),
            )
            for n, board in zip((1, 2), boards, strict=True)
        ]
        said: list[str] = []
        console = Console(tables, said.append, "http://127.0.0.1:1")
        assert console.prompt == "pmg-01> "
        assert await console.handle("table pmg-02") and console.prompt == "pmg-02> "
        assert await console.handle("bet 3")
        assert boards[1].present == {3} and boards[0].present == set()
        assert await console.handle("status")  # the chosen board answers on the console
        assert said[-1].startswith("pmg-02 board: board SIM-1"), said
        assert await console.handle("bet 9")
        assert "pmg-02 board error: seat 9 outside 1..7" in said
        assert await console.handle("table 3")
        assert said[-1] == "usage: table N (1..2) or table ID (pmg-01, pmg-02)"
        assert await console.handle("table 1") and console.prompt == "pmg-01> "
        assert await console.handle("help") and "table N | table ID" in said[-1]
        assert await console.handle("tables") and said[-1].startswith("2 pmg-02: control")
        assert not await console.handle("quit")
    finally:
        for board in boards:
            await board.stop()
