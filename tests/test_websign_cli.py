"""``progressivectl sign --web``: usage errors are one line and exit 2."""

from __future__ import annotations

import socket
import subprocess
import sys


def sign(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "progressived.cli.ctl", "sign", *args],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def test_a_bad_or_busy_listen_address_is_one_line_and_exit_2() -> None:
    bad = sign("--web", "--listen", "nowhere")
    assert (bad.returncode, bad.stderr) == (
        2, "progressivectl sign: --listen wants HOST:PORT, not 'nowhere'\n",
    )  # fmt: skip
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = sign("--web", "--listen", f"127.0.0.1:{port}", "--port", "1", "--table", "t1")
    assert taken.returncode == 2
    assert taken.stderr.startswith(f"progressivectl sign: cannot listen on 127.0.0.1:{port}: ")
    assert taken.stderr.count("\n") == 1


def test_the_terminal_sign_still_needs_one_table() -> None:
    none = sign("--plain")
    assert none.returncode == 2
    assert none.stderr == "progressivectl sign: the terminal sign shows one table: give --table once\n"
