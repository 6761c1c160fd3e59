"""``progressived demo``: the README's run command, end to end, headless (with its web
sign), typed at, and on a tty."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from progressived.demo.console import daemon_problem, narrate
from progressived.signs.screen import HOME_CLEAR
from progressived.testing.waits import until_sync

DEMO = [sys.executable, "-m", "progressived.cli.daemon", "demo"]


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A short temporary directory instead of pytest's: the demo makes its control socket
    inside it, and a Unix socket's path holds 107 bytes at most, which pytest-xdist's
    per-worker directories (``.../popen-gw0/test_.../progressived-demo-XXXX/``) exceed."""
    short = Path(tempfile.mkdtemp(prefix="pd-", dir="/tmp"))
    yield short
    shutil.rmtree(short, ignore_errors=True)
CTL = [sys.executable, "-m", "progressived.cli.ctl"]


@pytest.mark.e2e
def test_headless_demo_plays_its_rounds_serves_its_web_sign_and_exits_0(tmp_path: Path) -> None:
    """The README's demo, headless: its rounds on screen as they happen, and, while it
    plays, the web sign at the URL its banner prints answers with the demo table's meter
    (read as a browser's page would, from the server's snapshot), drawn into the page with
    the names of the demo's sign file. One run of the demo for both."""
    proc = subprocess.Popen(
        [*DEMO, "--headless", "--rounds", "3", "--workdir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    found: re.Match[str] | None = None
    try:
        for line in proc.stdout:
            lines.append(line)
            if found := re.match(r"web sign    (http://127\.0\.0\.1:\d+)/table/demo-1 ", line):
                break
        assert found, "".join(lines)
        snapshot, html = web_sign_while_playing(found.group(1))
    finally:
        rest, err = proc.communicate(timeout=180)
    out = "".join(lines) + rest
    assert proc.returncode == 0, out + err
    # The web sign's page and snapshot, taken while the demo played.
    assert "/static/sign.js" in html and "Waiting for a table" not in html
    assert "Demo Table" in html and "Three Card Poker Progressive" in html
    sources = {s["key"]: s for s in snapshot["sources"]}
    assert snapshot["broker"]["state"] == "connected"
    meters = sources["table/demo-1"]["meters"]
    assert meters and meters[0]["meter"] == "main" and meters[0]["display"].startswith("$")
    # The rounds, said on screen.
    assert "broker      mqtt://127.0.0.1:" in out
    assert f"control     {tmp_path / 'control.sock'}  (progressivectl status --socket" in out
    assert f"files       {tmp_path}: progressived.toml, ledger.db" in out
    assert "WINNER: table demo-1 seat 3 akq-spades $1,000.45" in out
    assert "rounds reconciled: 3 of 3" in out
    # What the README promises, said on screen as it happens.
    assert "ENVY bonus: seat 5 gets $100.00 because seat 3 hit akq-spades" in out
    assert "ENVY bonus: seat 4 gets $25.00 because seat 2 hit akq-suited" in out
    assert "seat 7 straight-flush turned off: a keying mistake undone" in out
    # The winner banner is gone once round 2 is locked.
    after = out[out.index("round 2: LOCK") :]
    assert "WINNER" not in after and "PAID" not in after
    assert f"kept the demo's files in {tmp_path}" in out
    assert "\x1b" not in out  # not a terminal: no escapes
    verify = subprocess.run(
        [*CTL, "ledger", "verify", "--db", str(tmp_path / "ledger.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr


def web_sign_while_playing(url: str) -> tuple[dict[str, Any], str]:
    """The web sign server's snapshot once it holds the demo's meter, and its table page."""

    def with_meters() -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"{url}/state.json", timeout=2) as answer:
                got: dict[str, Any] = json.load(answer)
        except (urllib.error.URLError, ConnectionError):
            return None
        return got if any(s.get("meters") for s in got.get("sources", [])) else None

    snapshot = until_sync(with_meters, "the demo's meter on the web sign", 60, every=0.2)
    with urllib.request.urlopen(f"{url}/table/demo-1", timeout=2) as page:
        return snapshot, page.read().decode()


def _removed_dir(out: str) -> Path:
    found = re.search(r"removed the demo's files in (\S+)", out)
    assert found, out
    return Path(found.group(1))


@pytest.mark.e2e
def test_typed_commands_show_their_answers_and_errors(tmp_path: Path) -> None:
    typed = "status\nbet 9\nfrobnicate\nbet 3\nkey LOCK\nkey H1\n"
    proc = subprocess.run(
        DEMO,
        input=typed,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    typing = out[out.index("type board commands") :]
    assert "> status\nboard: board SIM-1 boot " in typing  # the simulator's answer
    assert "> bet 9\nboard error: seat 9 outside 1..7" in typing  # its error
    assert "board error: unknown command 'frobnicate' (try: help)" in typing
    assert "board: lights 1=idle 2=idle 3=bet" in typing  # the board's lights after bet 3
    assert "round 4: LOCK - wagers on seats 3" in typing  # the daemon's event
    assert "daemon refused key H1: REFUSED: press a seat before the hand" in typing
    assert "\x1b" not in out
    work = _removed_dir(out)
    assert work.parent == tmp_path and not work.exists()
    assert f"control     {work / 'control.sock'}" in out


@pytest.mark.e2e
def test_on_a_terminal_the_screen_is_redrawn_in_place(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    env = {**os.environ, "TMPDIR": str(tmp_path), "COLUMNS": "100", "LINES": "30"}
    proc = subprocess.Popen(DEMO, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return  # EIO: the demo closed the terminal
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()

    def seen() -> str:
        return b"".join(chunks).decode(errors="replace")


    def prompted() -> bool:
        if "type board commands" in seen():
            return True
        assert proc.poll() is None, f"the demo exited {proc.returncode}: {seen()[-3000:]}"
        return False

    until_sync(prompted, "the demo's prompt", 120)
    os.write(master, b"bet 9\n")
    time.sleep(1.5)
    os.write(master, b"\x04")  # Ctrl-D: end of input
    assert proc.wait(timeout=60) == 0, seen()
    reader.join(timeout=5)
    os.close(master)
    out = seen()
    frames = out.split(HOME_CLEAR)
    assert len(frames) > 10  # redrawn, not scrolled
    answered = next(f for f in frames if "board error: seat 9 outside 1..7" in f)
    work = _removed_dir(out)
    # The redrawn screen keeps the web sign's URL, the control socket and the files on top.
    assert re.match(
        r"web sign http://127\.0\.0\.1:\d+/table/demo-1 .*\r\n"
        + re.escape(f"control socket {work / 'control.sock'}\r\nfiles {work}"),
        answered,
    ), answered[:300]
    assert "progressive main" in answered and "> bet 9" in answered
    assert answered.endswith("Ctrl-C stops\r\n> ")  # the prompt, where the cursor waits
    assert answered.count("\n") <= 29  # the whole frame fits the terminal's 30 rows
    assert not work.exists()


def test_narration_names_envy_and_a_keying_mistake() -> None:
    envy = {"kind": "envy", "seat": 5, "from_seat": 3, "hand": "akq-spades", "cents": 10000}
    assert narrate(envy) == "ENVY bonus: seat 5 gets $100.00 because seat 3 hit akq-spades"
    off = {"kind": "hand_unkeyed", "seat": 7, "hand": "straight-flush", "cents": 0}
    assert "seat 7 straight-flush turned off: a keying mistake undone" in str(narrate(off))
    assert narrate({"kind": "daemon_started"}) is None


def test_daemon_warnings_reach_the_screen_and_info_does_not() -> None:
    warning = {"event": "board connect failed", "level": "warning", "error": "no such file"}
    assert daemon_problem("<4>" + json.dumps(warning)) == (
        "daemon warning: board connect failed (error=no such file)"
    )
    assert daemon_problem(json.dumps({"event": "round locked", "level": "info"})) is None
    refused = {"event": "key sequence refused", "level": "warning"}  # shown from its event
    assert daemon_problem(json.dumps(refused)) is None
    assert daemon_problem("not json at all") is None


@pytest.mark.e2e
def test_sigterm_stops_the_demo_cleanly_and_says_its_files_are_removed(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        DEMO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("-- scripted round 1"):
            break
    proc.send_signal(signal.SIGTERM)
    rest, err = proc.communicate(timeout=60)
    out = "".join(lines) + rest
    assert proc.returncode == 0, out + err
    assert "Traceback" not in err
    assert "stopped" in rest
    work = _removed_dir(out)
    assert not work.exists()
