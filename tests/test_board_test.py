"""``progressivectl board-test``: the conformance tool against the project's simulator (every
case passes) and against deliberately broken simulators (the specific case fails), on real
ptys. The CLI run drives ``simulate-board`` in a subprocess through its stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from progressived_drivers.board_link import BoardLink
from progressived_drivers.board_sim import BoardSimulator
from progressived_drivers.board_test import BoardTester, Report

pytestmark = pytest.mark.e2e  # the board simulator and the board test as processes (pyproject.toml's markers)


async def _run(faults: tuple[str, ...] = ()) -> Report:
    sim = BoardSimulator(seats=7, heartbeat_interval_s=0.5, faults=faults)
    path = await sim.start()
    link = BoardLink(path)
    await link.open()

    def act(_instruction: str, command: str) -> None:
        if command == "reboot":
            sim.reboot()
        else:
            sim.press(command.split()[1])

    try:
        return await BoardTester(link, act=act, heartbeat_ms=100, action_timeout_s=3).run()
    finally:
        await link.close()
        await sim.stop()


def _failed(report: Report) -> dict[str, str]:
    return {c.name: c.detail for c in report.cases if not c.passed}


async def test_the_simulator_passes_every_case() -> None:
    report = await _run()
    assert _failed(report) == {}
    assert report.passed
    assert [c.name for c in report.cases] == list(BoardTester.CASES)
    assert report.board["seats"] == 7
    assert report.line["crc_errors"] == 0


@pytest.mark.parametrize(
    ("fault", "case", "detail"),
    [
        ("no_hello_reply", "hello", "no HELLO in answer"),
        ("ack_stale", "stale_lights", "duplicate LIGHTS (same seq) was acknowledged"),
        ("no_key_retransmit", "key_retransmission", "was not retransmitted"),
        ("lenient", "reboot", "a LIGHTS before the controller's hello was acknowledged"),
        ("bad_crc", "board_frames", "board sent malformed frames: crc_error"),
        ("no_periodic_state", "periodic_state", "STATE in 16 idle intervals"),
        ("no_key_after_hello", "key_retransmission", "not resent right after the HELLO"),
    ],
)
async def test_a_broken_board_fails_the_case_it_breaks(fault: str, case: str, detail: str) -> None:
    report = await _run((fault,))
    failed = _failed(report)
    assert not report.passed
    assert case in failed, failed
    assert detail in failed[case]
    if fault != "bad_crc":  # bad heartbeats also break the heartbeat count
        assert set(failed) == {case}, failed


def _ctl(*args: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from progressived.cli.ctl import main; raise SystemExit(main())",
        *args,
    ]


def test_cli_against_simulate_board_passes_and_reports_json(tmp_path: Path) -> None:
    link = tmp_path / "board"
    sim = subprocess.Popen(
        [*_ctl("simulate-board", "--link", str(link), "--heartbeat", "0.5")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sim.stdout is not None and sim.stdin is not None
        assert sim.stdout.readline().startswith("link ")
        test = subprocess.Popen(
            [
                *_ctl(
                    "board-test",
                    "--port",
                    str(link),
                    "--json",
                    "--heartbeat-ms",
                    "100",
                    "--action-timeout",
                    "5",
                )
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert test.stderr is not None
        actions = []
        for line in test.stderr:  # the person at the board: do what is asked
            if line.startswith("ACTION:"):
                actions.append(line)
                command = line.rsplit("simulate-board: ", 1)[1].rstrip(")\n")
                sim.stdin.write(command + "\n")
                sim.stdin.flush()
        out, _ = test.communicate(timeout=60)
        assert test.returncode == 0, out
        report = json.loads(out)
        assert report["passed"] is True
        assert all(c["passed"] for c in report["cases"])
        assert len(report["cases"]) == len(BoardTester.CASES) == 13
        assert len(actions) == 2
    finally:
        sim.terminate()
        sim.wait(10)


def test_cli_exit_codes_for_failures_and_a_missing_port(tmp_path: Path) -> None:
    missing = subprocess.run(
        _ctl("board-test", "--port", str(tmp_path / "nope")),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert missing.returncode == 2
    assert "cannot open" in missing.stderr
    assert "Traceback" not in missing.stderr
    # a silent pty: nothing answers, so the hello fails and the run stops there
    master, slave = os.openpty()
    try:
        silent = subprocess.run(
            _ctl("board-test", "--port", os.ttyname(slave), "--heartbeat-ms", "100"),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert silent.returncode == 1
        assert "FAIL  heartbeat_before_hello" in silent.stdout
        assert "FAIL  hello" in silent.stdout
        assert "0 passed, 2 failed" in silent.stdout  # and stopped there (timeout above)
    finally:
        os.close(master)
        os.close(slave)
