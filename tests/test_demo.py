"""``progressived demo --headless``: the README's run command, end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_headless_demo_plays_its_rounds_and_exits_0(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "progressived.cli.daemon",
            "demo",
            "--headless",
            "--rounds",
            "3",
            "--workdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "broker      mqtt://127.0.0.1:" in out
    assert "WINNER: table demo-1 seat 3 akq-spades $1,000.45" in out
    assert "rounds reconciled: 3 of 3" in out
    verify = subprocess.run(
        [
            sys.executable,
            "-m",
            "progressived.cli.ctl",
            "ledger",
            "verify",
            "--db",
            str(tmp_path / "ledger.db"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
