"""How the processes stop, and what they say: Ctrl-C is status 130 at any moment (one line
on standard error), SIGTERM a clean stop (status 0, not one warning in the log), and an
unhealthy table says so in the `health` line docs/operations.md shows.

Real processes and signals; each moment is reached by waiting for what the process says
(a log line), or for it to block reading its configuration.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

import pytest

from progressived.testing.waits import WaitTimeout, until, until_sync
from tests.daemon_harness import table
from tests.test_cli_faults import DAEMON, config, one_line
from tests.test_docs_faults import documented_health_line
from tests.test_start_checks import init, link_config

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)


def records(text: str) -> list[dict[str, Any]]:
    """The JSON log lines (journald's ``<N>`` prefix dropped)."""
    found = []
    for line in text.splitlines():
        start = line.find("{")
        if start >= 0:
            try:
                found.append(json.loads(line[start:]))
            except ValueError:
                continue
    return found


def warnings_in(text: str) -> list[dict[str, Any]]:
    return [r for r in records(text) if r.get("level") in ("warning", "error", "critical")]


def read_until(stream: IO[str], marker: str, seen: list[str], timeout: float = 60) -> None:
    """Read ``stream`` line by line (into ``seen``) until a line holds ``marker``."""
    done = threading.Event()

    def pump() -> None:
        for line in stream:
            seen.append(line)
            if marker in line:
                done.set()
                return

    threading.Thread(target=pump, daemon=True).start()
    assert done.wait(timeout), f"no {marker!r} in:\n{''.join(seen)}"


def interrupted(proc: subprocess.Popen[str], sig: int = signal.SIGINT) -> tuple[int, str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


# ------------------------------------------------------------------------- progressived run


def test_run_ctrl_c_while_it_reads_its_configuration(tmp_path: Path) -> None:
    """The earliest moment a test can name: blocked reading the file (a FIFO nobody writes
    yet), after the command's imports."""
    fifo = tmp_path / "progressived.toml"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [*DAEMON, "run", "--config", str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def opened() -> list[int] | None:  # once the daemon has the FIFO open for reading
        try:
            return [os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)]
        except OSError:  # ENXIO: no reader yet
            assert proc.poll() is None, proc.communicate(timeout=30)
            return None

    (writer,) = until_sync(opened, "the daemon reading the FIFO", 60)
    try:
        status, out, err = interrupted(proc)
    finally:
        os.close(writer)
    assert status == 130, err
    assert (
        one_line(subprocess.CompletedProcess([], status, out, err)) == "progressived: interrupted"
    )


@pytest.mark.parametrize("moment", ["self-check passed", '"event": "running"'])
def test_run_ctrl_c_while_starting_and_running_is_130(tmp_path: Path, moment: str) -> None:
    cfg = config(tmp_path)
    init(cfg)
    proc = subprocess.Popen(
        [*DAEMON, "run", "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[str] = []
    assert proc.stdout is not None
    read_until(proc.stdout, moment, seen)
    status, out, err = interrupted(proc)
    assert status == 130, err
    assert (
        one_line(subprocess.CompletedProcess([], status, out, err)) == "progressived: interrupted"
    )
    log = "".join(seen) + out
    assert any(r.get("event") == "stopped" for r in records(log)), log  # a clean stop
    assert not (tmp_path / "control.sock").exists()


async def test_run_sigterm_is_a_clean_stop_without_a_warning(tmp_path: Path) -> None:
    async with table(tmp_path) as t:
        t.start_daemon()
        await t.online()
        assert t.stop_daemon(signal.SIGTERM) == 0
        log = t.log_text()
    assert any(r.get("event") == "stopped" for r in records(log))
    assert warnings_in(log) == []


async def test_the_board_offline_health_line(tmp_path: Path) -> None:
    """docs/operations.md, "The watchdog": past the grace, an error line `health` with
    `healthy` false and the reason; back online, an info line with `healthy` true."""
    async with table(tmp_path) as t:
        t.config.write_text(t.config.read_text() + "\n[watchdog]\nboard_offline_grace_s = 0.5\n")
        t.start_daemon()
        await t.online()
        await t.sim.stop()
        unhealthy = await logged(t, lambda r: r.get("event") == "health")
        assert unhealthy["level"] == "error" and unhealthy["healthy"] is False
        assert unhealthy["reason"].startswith("board offline for ")
        assert unhealthy["reason"].endswith("s") and unhealthy["table"] == "it-1"
        assert set(unhealthy) == set(documented_health_line())  # the keys the doc shows
        await t.sim.start()
        healthy = await logged(t, lambda r: r.get("event") == "health" and r["healthy"])
        assert (healthy["level"], healthy["reason"]) == ("info", "ok")


async def logged(t: Any, match: Any, timeout: float = 30) -> dict[str, Any]:
    """The first log record of the daemon's last run that ``match`` accepts, once logged."""

    def found() -> dict[str, Any] | None:
        for record in records(t.log_text()):
            if match(record):
                return record
        assert t.proc.poll() is None, t.log_text()[-3000:]
        return None

    try:
        return await until(found, "the log record", timeout, every=0.05)
    except WaitTimeout:
        raise AssertionError(t.log_text()[-3000:]) from None


# ------------------------------------------------------------------------- progressived link


@pytest.mark.parametrize(
    ("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)], ids=["ctrl-c", "sigterm"]
)
def test_link_stops_with_the_documented_status(tmp_path: Path, sig: int, status: int) -> None:
    cfg = link_config(tmp_path)
    cfg.write_text(cfg.read_text() + '\n[log]\nformat = "json"\n')
    init(cfg)
    proc = subprocess.Popen(
        [*DAEMON, "link", "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[str] = []
    assert proc.stdout is not None
    read_until(proc.stdout, '"event": "running"', seen)
    code, out, err = interrupted(proc, sig)
    assert code == status, err
    log = "".join(seen) + out
    assert any(r.get("event") == "stopped" for r in records(log)), log
    if sig == signal.SIGINT:
        assert one_line(subprocess.CompletedProcess([], code, out, err)) == (
            "progressived: interrupted"
        )
    else:
        assert err == ""
        # The broker (port 1) is unreachable: that warning is about the broker, not the stop.
        assert [r for r in warnings_in(log) if "broker" not in r["event"]] == []


# ------------------------------------------------------------------------- progressived demo


def test_demo_ctrl_c_once_it_is_interactive_is_130(tmp_path: Path) -> None:
    """The interactive demo ends with Ctrl-C; that is an interruption, as the table says."""
    proc = subprocess.Popen(
        [*DAEMON, "demo", "--workdir", str(tmp_path / "demo")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    seen: list[str] = []
    assert proc.stdout is not None
    read_until(proc.stdout, "rounds reconciled", seen, timeout=120)
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, "".join(seen) + out + err
    assert "interrupted" in err and "Traceback" not in out + err
