"""bench/latency_budget.py: the daemon's key-press and outbox spans joined by ledger seq into
a budget per stage, the stages the daemon cannot see derived from the press times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.latency_budget import main, spans

KEY = {
    "event": "key journaled", "level": "info", "seq": 9, "last_seq": 11,
    "wait_ms": 0.1, "engine_ms": 0.2, "plan_ms": 0.05, "commit_ms": 1.0, "observers_ms": 0.15,
    "timestamp": "2026-11-29T00:00:00.010000Z",
}
SENT = {  # the press's first published row is seq 11 (9 and 10 are not published)
    "event": "outbox sent", "level": "info", "seq": 11, "rows": 1,
    "read_ms": 0.5, "puback_ms": 1.0, "ack_ms": 0.5,
    "timestamp": "2026-11-29T00:00:00.013000Z",
}
EARLIER = {**SENT, "seq": 3, "rows": 5, "timestamp": "2026-11-29T00:00:00.001000Z"}


def _log() -> str:
    # journald's priority prefix, as the daemon writes under systemd and in the bench
    return "".join(f"<6>{json.dumps(e)}\n" for e in (EARLIER, KEY, SENT)) + "not json\n"


def test_stages_are_joined_by_seq_and_derived_from_the_press_time() -> None:
    pressed = 1795910400.0 + 0.010 - 0.0015 - 0.0005  # the key line's time, spans, 0.5 ms pty
    got = {stage: [round(v * 1e3, 3) for v in values]
           for stage, values in spans(_log(), [pressed]).items()}
    assert got["commit"] == [1.0] and got["observers"] == [0.15]
    assert got["outbox_read"] == [0.5] and got["publish"] == [1.0]
    assert got["handoff"] == [1.0]  # 13 ms - 2 ms of the batch's spans - 10 ms
    assert got["pty_read_decode"] == [pytest.approx(0.5, abs=0.01)]


def test_without_the_press_times_the_daemon_stages_alone() -> None:
    assert spans(_log())["pty_read_decode"] == []


def test_the_command_prints_the_stages_of_a_saved_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "daemon.log"
    log.write_text(_log())
    assert main([str(log)]) == 0
    assert "commit" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.log")]) == 2
