"""systemd/progressived-archive.service: the link unit's hardening bar, checked with real
tools (``systemd-analyze verify`` printing nothing, ``security --offline=yes`` <= 2.0), and
the command docs/archive.md documents."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.test_systemd_unit import INSTALLED, MAX_EXPOSURE, ROOT, exposure, parse_unit, verify

UNIT = ROOT / "systemd" / "progressived-archive.service"
CONFIG = "/etc/progressived/archive.toml"


def verifiable_copy(tmp_path: Path, text: str) -> Path:
    exe = Path(sys.executable).parent / "progressived"
    assert exe.is_file()
    copy = tmp_path / "progressived-archive.service"
    copy.write_text(text.replace(f"={INSTALLED} ", f"={exe} "))
    return copy


def test_verify_prints_nothing_and_would_catch_a_typo(tmp_path: Path) -> None:
    assert verify(verifiable_copy(tmp_path, UNIT.read_text())) == ""
    broken = UNIT.read_text().replace("RestartSec=", "RestartSecs=")
    assert "RestartSecs" in verify(verifiable_copy(tmp_path, broken))


def test_security_exposure_is_2_or_better() -> None:
    assert exposure(UNIT) <= MAX_EXPOSURE


def test_runs_the_documented_command_and_restarts_always() -> None:
    s = parse_unit(UNIT.read_text())["Service"]
    assert s["ExecStart"] == [f"{INSTALLED} archive --config {CONFIG}"]
    assert s["ExecStartPre"] == [f"{INSTALLED} check-config {CONFIG}"]
    # No READY=1 from the archive: notify would fail every start after its timeout.
    assert s["Type"] == ["simple"] and s["Restart"] == ["always"]
    docs = (ROOT / "docs" / "archive.md").read_text()
    assert "systemd/progressived-archive.service" in docs
    assert f"progressived archive --config {CONFIG}" in docs
