"""A control socket that cannot be made is one line and exit 2 before anything starts.

`progressived run` and `progressived link` check their ``[control] socket`` first: a path
longer than a Unix socket's address holds (or, run by hand, a directory the user cannot
make: tests/test_operations_install.py runs that as the real service user) used to surface
as a traceback after the ledger had been opened.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from progressived.runtime.control import MAX_SOCKET_PATH, control_socket_problem

DAEMON = [sys.executable, "-m", "progressived.cli.daemon"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DAEMON, *args], capture_output=True, text=True, timeout=60)


def _long_socket(tmp: Path) -> Path:
    folder = tmp / ("s" * (MAX_SOCKET_PATH - len(str(tmp))))
    folder.mkdir()
    return folder / "control.sock"


TABLE = """
[table]
id = "t-1"
paytable = "tcp-sd-1"

[[progressive.meters]]
id = "main"
rate = 0.15

[board]
driver = "serial"
port = "{tmp}/no-board"

[mqtt]
host = "127.0.0.1"
port = 1

[ledger]
path = "{tmp}/ledger.db"

[metrics]
enabled = false

[control]
socket = "{socket}"
"""

LINK = """
[link]
id = "link-a"
tables = ["t-1"]

[[link.meters]]
id = "pmg"
paytable = "pmg-01"
rate = 0.15

[mqtt]
host = "127.0.0.1"
port = 1

[ledger]
path = "{tmp}/link.db"

[metrics]
enabled = false

[control]
socket = "{socket}"
"""


def _refused(result: subprocess.CompletedProcess[str], socket: Path) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"control.socket: cannot make the control socket {socket}" in lines[0]
    return lines[0]


def test_run_refuses_a_socket_path_longer_than_a_unix_address(tmp_path: Path) -> None:
    socket = _long_socket(tmp_path)
    cfg = tmp_path / "t.toml"
    cfg.write_text(TABLE.format(tmp=tmp_path, socket=socket))
    made = _run("init", "--config", str(cfg))
    assert made.returncode == 0, made.stderr
    line = _refused(_run("run", "--config", str(cfg)), socket)
    assert f"the path is {len(str(socket))} bytes long, more than the 107" in line
    assert not socket.exists()


def test_link_refuses_a_socket_path_longer_than_a_unix_address(tmp_path: Path) -> None:
    socket = _long_socket(tmp_path)
    cfg = tmp_path / "link.toml"
    cfg.write_text(LINK.format(tmp=tmp_path, socket=socket))
    made = _run("init", "--config", str(cfg))
    assert made.returncode == 0, made.stderr
    _refused(_run("link", "--config", str(cfg)), socket)


def test_the_check_passes_what_can_be_made_and_names_what_cannot(tmp_path: Path) -> None:
    assert control_socket_problem(tmp_path / "control.sock") is None
    assert control_socket_problem(tmp_path / "new" / "dir" / "control.sock") is None  # made
    just_fits = tmp_path / ("s" * (MAX_SOCKET_PATH - len(str(tmp_path)) - 1))
    assert len(str(just_fits)) == MAX_SOCKET_PATH
    assert control_socket_problem(just_fits) is None
    too_long = control_socket_problem(Path(str(just_fits) + "s"))
    assert too_long is not None and "108 bytes long" in too_long
