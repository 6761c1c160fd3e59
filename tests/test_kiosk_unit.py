"""systemd/progressived-kiosk.service: a screen that boots straight into the sign.

``systemd-analyze verify`` must print nothing (warnings are failures, as for the other
units). The unit runs ``/usr/bin/cage``, Debian's ``cage`` package, which a build machine
need not have; verify would rightly say the program is missing, so where cage is not
installed the test verifies a copy naming another existing program in its place, every
other byte unchanged.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.test_systemd_unit import ROOT, parse_unit, verify

UNIT = ROOT / "systemd" / "progressived-kiosk.service"
SYSUSERS = ROOT / "systemd" / "progressived-kiosk.sysusers"
CAGE = "/usr/bin/cage"
LAUNCHER = "/opt/progressived/share/progressived/kiosk.html"


def unit_settings() -> dict[str, dict[str, list[str]]]:
    """The unit's settings, continued lines (a trailing backslash) joined."""
    return parse_unit(UNIT.read_text().replace("\\\n", " "))


def verifiable_copy(tmp_path: Path, text: str) -> Path:
    copy = tmp_path / "progressived-kiosk.service"
    stand_in = CAGE if Path(CAGE).is_file() else shutil.which("env")
    assert stand_in is not None
    copy.write_text(text.replace(f"={CAGE} ", f"={stand_in} "))
    return copy


def test_verify_prints_nothing_and_would_catch_a_typo(tmp_path: Path) -> None:
    assert verify(verifiable_copy(tmp_path, UNIT.read_text())) == ""
    broken = UNIT.read_text().replace("TTYVHangup=", "TTYHangup=")
    assert "TTYHangup" in verify(verifiable_copy(tmp_path, broken))


def test_cage_runs_chromium_in_kiosk_mode_on_the_start_page() -> None:
    unit = unit_settings()
    service = unit["Service"]
    (start,) = service["ExecStart"]
    words = start.split()
    assert words[:4] == [CAGE, "-d", "--", "/usr/bin/chromium"]
    for flag in ("--kiosk", "--noerrdialogs", "--incognito", "--no-first-run",
                 "--ozone-platform=wayland", "--user-data-dir=${RUNTIME_DIRECTORY}/chromium"):  # fmt: skip
        assert flag in words, flag
    assert words[-1] == f'"file://{LAUNCHER}#${{SIGN_URL}}"'
    assert (ROOT / "progressived" / "signs" / "web" / "static" / "kiosk.html").is_file()
    assert "Environment=SIGN_URL=http://127.0.0.1:8090/table/tcp-07" in UNIT.read_text()
    assert service["Restart"] == ["always"] and service["TTYPath"] == ["/dev/tty1"]
    assert service["PAMName"] == ["login"] and service["StandardInput"] == ["tty-fail"]
    assert unit["Unit"]["Conflicts"] == ["getty@tty1.service"]
    assert unit["Install"]["WantedBy"] == ["graphical.target"]


def test_the_kiosk_user_is_the_one_sysusers_makes() -> None:
    (user,) = unit_settings()["Service"]["User"]
    lines = [line.split() for line in SYSUSERS.read_text().splitlines() if line[:1] in "um"]
    assert ["u", user] == lines[0][:2]
    assert {line[2] for line in lines[1:] if line[1] == user} == {"video", "render", "input"}


def test_docs_install_the_start_page_where_the_unit_opens_it() -> None:
    sign = (ROOT / "docs" / "sign.md").read_text()
    # (tests/test_operations_install.py runs the block and compares the installed copy)
    assert f"progressived/signs/web/static/kiosk.html \\ {LAUNCHER}" in " ".join(sign.split())
    assert "systemd/progressived-kiosk.service" in sign
