"""A configuration's problems all at once, a misspelt key with "did you mean", the other
command for the other kind of file, and every path in a message absolute."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from progressived.config.daemon import load_daemon_config
from progressived.link.runtime.config import load_link_config
from tests.conftest import ROOT
from tests.test_cli_faults import DAEMON, config, one_line, run
from tests.test_start_checks import link_config

EXAMPLE = ROOT / "config" / "progressived.toml"


def broken_example(tmp: Path) -> Path:
    """The example with six mistakes in six places."""
    text = EXAMPLE.read_text()
    for old, new in [
        ("seats = 7", "seat = 7"),  # a misspelt key
        ("rate = 0.15 ", "rate = 1.5 "),  # a bad value, found after the file's structure
        ("port = 1883", "prot = 1883"),
        ("[log]", "[logs]"),  # a misspelt section
        ('lock = "LOCK"', 'lok = "LOCK"'),
        ('format = "auto"', 'format = "auto"\n[metrics.extra]'),
    ]:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp / "bad.toml"
    path.write_text(text)
    return path


EXPECTED = [
    "table.seat: unknown key (did you mean 'seats'?)",
    "mqtt.prot: unknown key (did you mean 'port'?)",
    "logs: unknown key (did you mean 'log'?)",
    "keypad.lok: unknown key (did you mean 'lock'?)",
    "progressive.meters[0]: rate 1.5 must be between 0 and 1",
]


@pytest.mark.parametrize("command", [("check-config",), ("run", "--config")])
def test_every_problem_at_once_with_did_you_mean(tmp_path: Path, command: tuple[str, ...]) -> None:
    bad = broken_example(tmp_path)
    result = run(*DAEMON, *command, str(bad))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    for expected in EXPECTED:
        assert any(line.startswith(f"progressived: {bad}: {expected}") for line in lines), (
            expected,
            lines,
        )
    assert all(line.startswith(f"progressived: {bad}: ") for line in lines), lines
    assert len(lines) == len(set(lines))  # each problem once


def test_a_links_problems_at_once_with_did_you_mean(tmp_path: Path) -> None:
    cfg = link_config(tmp_path)
    text = cfg.read_text().replace("[link.meters]]", "[link.meters]]\nreserv_rate = 0.01", 1)
    text = text.replace("[mqtt]", '[mqtt]\nusernme = "link-a"')
    cfg.write_text(text.replace('"t-1", "t-2"', '"t-1", "t-1"'))
    result = run(*DAEMON, "check-config", str(cfg))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"progressived: {cfg}: link.meters[0].reserv_rate: unknown key "
        "(did you mean 'reserve_rate'?)",
        f"progressived: {cfg}: mqtt.usernme: unknown key (did you mean 'username'?)",
        f"progressived: {cfg}: link.tables: a table is listed twice",
    ]


def test_run_on_a_link_file_and_link_on_a_table_file_name_the_other_command(
    tmp_path: Path,
) -> None:
    link = link_config(tmp_path)
    result = run(*DAEMON, "run", "--config", str(link))
    assert result.returncode == 2
    assert one_line(result) == (
        f"progressived: {link}: this is a link controller's configuration ([link] and no "
        f"[table]): run `progressived link --config {link}`"
    )
    table = config(tmp_path)
    result = run(*DAEMON, "link", "--config", str(table))
    assert result.returncode == 2
    assert one_line(result) == (
        f"progressived link: {table}: this is a table's configuration ([table]): run "
        f"`progressived run --config {table}`"
    )


def test_relative_paths_are_shown_and_used_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative path is relative to the configuration file, wherever the command runs;
    messages show it absolute."""
    folder = tmp_path / "etc"
    folder.mkdir()
    cfg = config(folder)
    text = cfg.read_text()
    text = text.replace(f'path = "{folder / "ledger.db"}"', 'path = "lib/ledger.db"')
    text = text.replace(f'socket = "{folder / "control.sock"}"', 'socket = "run/control.sock"')
    cfg.write_text(text)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run(
        [*DAEMON, "check-config", f"../etc/{cfg.name}"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3
    assert result.stderr.splitlines()[0] == (
        f"{cfg}: ledger.path: the ledger directory {folder / 'lib'} does not exist (a typo? "
        f"else create it, then initialise a new table's ledger with `progressived init "
        f"--config {cfg}`)"
    )
    monkeypatch.chdir(elsewhere)
    loaded = load_daemon_config(Path("../etc") / cfg.name)
    assert loaded.source == cfg
    assert loaded.ledger.path == folder / "lib" / "ledger.db"
    assert loaded.control.socket == folder / "run" / "control.sock"


def test_a_links_relative_paths_are_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = link_config(tmp_path)
    cfg.write_text(
        cfg.read_text()
        .replace(f'path = "{tmp_path / "ledger.db"}"', 'path = "link.db"')
        .replace(f'socket = "{tmp_path / "link.sock"}"', 'socket = "link.sock"')
    )
    monkeypatch.chdir("/")
    loaded = load_link_config(Path(os.path.relpath(cfg, "/")))
    assert loaded.source == cfg
    assert (loaded.ledger.path, loaded.control.socket) == (
        tmp_path / "link.db",
        tmp_path / "link.sock",
    )
