"""systemd/progressived-link.service: the table unit's hardening bar, checked with real tools
(``systemd-analyze verify`` printing nothing, ``security --offline=yes`` <= 2.0)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.test_systemd_unit import (
    DAEMON_SYSCALLS,
    EXPECTED_SYSCALLS,
    INSTALLED,
    MAX_EXPOSURE,
    ROOT,
    allowed_syscalls,
    exposure,
    parse_unit,
    service,
    verify,
)

UNIT = ROOT / "systemd" / "progressived-link.service"
CONFIG = "/etc/progressived/link.toml"


def link_service() -> dict[str, list[str]]:
    return parse_unit(UNIT.read_text())["Service"]


def verifiable_copy(tmp_path: Path, text: str) -> Path:
    exe = Path(sys.executable).parent / "progressived"
    assert exe.is_file()
    copy = tmp_path / "progressived-link.service"
    copy.write_text(text.replace(f"={INSTALLED} ", f"={exe} "))
    return copy


def test_verify_prints_nothing_and_would_catch_a_typo(tmp_path: Path) -> None:
    assert verify(verifiable_copy(tmp_path, UNIT.read_text())) == ""
    broken = UNIT.read_text().replace("WatchdogSec=", "WatchdogSecs=")
    assert "WatchdogSecs" in verify(verifiable_copy(tmp_path, broken))


def test_security_exposure_is_2_or_better() -> None:
    assert exposure(UNIT) <= MAX_EXPOSURE


def test_runs_the_link_controller_as_a_notify_service() -> None:
    s = link_service()
    assert s["ExecStart"] == [f"{INSTALLED} link --config {CONFIG}"]
    assert s["ExecStartPre"] == [f"{INSTALLED} check-config {CONFIG}"]
    assert s["Type"] == ["notify"] and s["Restart"] == ["always"]
    assert s["StateDirectory"] == ["progressived-link"]
    assert s["RuntimeDirectory"] == ["progressived-link"]
    example = (ROOT / "config" / "link.toml").read_text()
    assert 'path = "/var/lib/progressived-link/link.db"' in example
    assert 'socket = "/run/progressived-link/control.sock"' in example


def test_same_hardening_as_the_table_unit_and_no_devices() -> None:
    s, table = link_service(), service()
    skip = {
        "ExecStart",
        "ExecStartPre",
        "StateDirectory",
        "RuntimeDirectory",
        "SupplementaryGroups",
        "DeviceAllow",
        "PrivateDevices",
    }
    for key, values in table.items():
        if key not in skip:
            assert s.get(key) == values, key
    assert s["PrivateDevices"] == ["yes"] and "DeviceAllow" not in s
    assert "SupplementaryGroups" not in s
    missing = sorted(
        set(DAEMON_SYSCALLS + EXPECTED_SYSCALLS) - allowed_syscalls(s["SystemCallFilter"])
    )
    assert not missing
