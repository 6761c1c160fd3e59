"""The board simulator drives the installed service: its pty opened by a user in dialout.

The unit runs the daemon as ``progressived`` (group ``dialout``), not as the operator who
starts ``progressivectl simulate-board``. ``openpty`` makes the pty the operator's, group
``tty``, mode 0620: the daemon's ``open`` is refused (``Permission denied``), the board never
comes online and the watchdog restarts the daemon every 35 s. ``--group dialout`` gives the
pty to the group with mode 0660, as udev gives a USB adapter (docs/operations.md, "A
simulated board for the service"). Here the daemon's side is the real serial driver in a
process running as ``nobody`` with ``dialout`` as its only supplementary group.
"""

from __future__ import annotations

import grp
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # the simulator and the driver as processes

CTL = [sys.executable, "-m", "progressived.cli.ctl", "simulate-board"]
NOBODY = 65534

# The daemon's side: the driver it runs, as the user it runs as. Says "online" once the
# board's HELLO came through, or the error of opening the port.
DRIVER = """
import asyncio, sys
from progressived_drivers.base import BoardOnline
from progressived_drivers.serial_board import BoardSettings, SerialBoardDriver

try:
    open(sys.argv[1], "r+b", buffering=0).close()
except OSError as exc:
    print(f"open: {exc.strerror}")
    sys.exit(1)

async def main() -> None:
    drv = SerialBoardDriver(BoardSettings(port=sys.argv[1], reconnect_initial_s=0.05))
    task = asyncio.create_task(drv.run())
    try:
        async with asyncio.timeout(30):  # online, whatever comes before it
            while not isinstance(await drv.next_event(), BoardOnline):
                pass
        print("online")
    finally:
        await drv.stop()
        await task

asyncio.run(main())
"""


@pytest.fixture
def run_dir() -> Iterator[Path]:
    """A directory every user may traverse (as /run is), for the link."""
    path = Path(tempfile.mkdtemp(prefix="progressived-sim-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_service_user(link: Path) -> subprocess.CompletedProcess[str]:
    """The driver run as nobody in dialout only, as the unit runs the daemon."""
    dialout = grp.getgrnam("dialout").gr_gid
    return subprocess.run(
        [
            *("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", f"--groups={dialout}"),
            *(sys.executable, "-c", DRIVER, str(link)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def simulator(link: Path, *flags: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [*CTL, "--link", str(link), "--no-stdin", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith(f"link {link} -> /dev/pts/"), first + proc.stderr.read()
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    assert proc.wait(timeout=20) == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the driver as another user")
def test_the_service_user_opens_the_simulators_pty_given_to_dialout(run_dir: Path) -> None:
    link = run_dir / "progressive-board"
    sim = simulator(link, "--group", "dialout")
    try:
        pty = os.stat(link)
        assert (stat.S_IMODE(pty.st_mode), pty.st_gid) == (0o660, grp.getgrnam("dialout").gr_gid)
        seen = as_service_user(link)
        assert seen.returncode == 0, seen.stdout + seen.stderr
        assert "online" in seen.stdout.splitlines(), seen.stdout + seen.stderr
    finally:
        stop(sim)
    assert not link.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the driver as another user")
def test_without_a_group_the_service_user_is_refused_the_pty(run_dir: Path) -> None:
    """Why the docs say ``--group dialout``: the pty as openpty makes it is the caller's."""
    link = run_dir / "progressive-board"
    sim = simulator(link)
    try:
        seen = as_service_user(link)
        assert seen.stdout.splitlines() == ["open: Permission denied"], seen.stdout + seen.stderr
    finally:
        stop(sim)


def test_an_unknown_group_is_one_line_and_exit_2() -> None:
    res = subprocess.run(
        [*CTL, "--group", "no-such-group-here", "--no-stdin"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (res.returncode, res.stderr) == (
        2,
        "progressivectl simulate-board: --group: no group no-such-group-here\n",
    )

