"""What docs/operations.md, configuration.md and sign.md say about faults, held to the
product: the exit-code table is the code's, and the lines they quote are the lines the
commands print."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from progressived.cli.common import Exit
from tests.conftest import ROOT
from tests.test_cli_faults import DAEMON, config, one_line, run
from tests.test_sign_systemd_unit import sign_service

DOCS = ROOT / "docs"
OPERATIONS = (DOCS / "operations.md").read_text()
CONFIGURATION = (DOCS / "configuration.md").read_text()


def section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def test_the_exit_code_table_is_the_codes() -> None:
    table = section(OPERATIONS, "Exit codes")
    documented = [int(m) for m in re.findall(r"^\| (\d+) \|", table, flags=re.MULTILINE)]
    assert documented == sorted(int(e) for e in Exit)


def test_the_documented_configuration_errors_are_printed(tmp_path: Path) -> None:
    """configuration.md's example: the example file with the four mistakes it names."""
    intro = CONFIGURATION[: CONFIGURATION.index("**Paths.**")]
    shown = [
        line.strip() for line in intro.splitlines() if line.startswith("    progressived: ")
    ]
    assert len(shown) == 4
    text = (ROOT / "config" / "progressived.toml").read_text()
    for old, new in re.findall(r"`([^`]+)` written\s+`([^`]+)`", intro):
        assert old in text, old
        text = text.replace(old, new, 1)
    bad = tmp_path / "progressived.toml"
    bad.write_text(text)
    result = run(*DAEMON, "check-config", str(bad))
    assert result.returncode == 2
    printed = result.stderr.replace(str(bad), "/etc/progressived/progressived.toml")
    assert printed.strip().splitlines() == shown


def test_runs_missing_ledger_line_is_as_documented(tmp_path: Path) -> None:
    (documented,) = re.findall(r"^progressived: .*no ledger at .*$", OPERATIONS, re.MULTILINE)
    cfg = config(tmp_path)
    result = run(*DAEMON, "run", "--config", str(cfg))
    assert result.returncode == 3
    line = one_line(result)
    line = line.replace(str(cfg), "/etc/progressived/progressived.toml")
    line = line.replace(str(tmp_path / "ledger.db"), "/var/lib/progressived/ledger.db")
    assert line == documented


def documented_health_line() -> dict[str, Any]:
    watchdog = section(OPERATIONS, "The watchdog")
    (block,) = re.findall(r"```json\n(.*?)\n```", watchdog, flags=re.DOTALL)
    line: dict[str, Any] = json.loads(block)
    return line


def test_the_health_line_example_is_well_formed() -> None:
    line = documented_health_line()
    assert (line["event"], line["level"], line["healthy"]) == ("health", "error", False)
    assert re.fullmatch(r"board offline for \d+s", line["reason"])


def test_sign_md_names_the_units_files() -> None:
    sign = (DOCS / "sign.md").read_text()
    service = section(sign, "Running it")
    s = sign_service()
    credential = s["LoadCredential"][0].split(":", 1)[1]
    env_file = s["EnvironmentFile"][0].lstrip("-")
    assert credential in service and env_file in service
    assert "systemd/progressived-sign.service" in service
    default = s["Environment"][0].strip('"').split("=", 1)[1]
    assert default.replace("sign-%l", "sign-lobby") in service  # the shown sign.env line
