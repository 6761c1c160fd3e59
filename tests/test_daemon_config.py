"""``progressived check-config``: the whole file validated, errors name file, key and reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from progressived.cli.daemon import main
from progressived.config.daemon import load_daemon_config
from progressived.config.table import ConfigError
from tests.conftest import ROOT

EXAMPLE = ROOT / "config" / "progressived.toml"


def test_the_example_configuration_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", "--file-only", str(EXAMPLE)]) == 0
    assert "ok (tcp-07, paytable tcp-sd-1)" in capsys.readouterr().out
    config = load_daemon_config(EXAMPLE)
    assert config.mqtt.prefix == "progressive"
    assert config.metrics.address == "127.0.0.1"
    assert config.metrics.port == 9464
    assert len(config.digest) == 64


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("rate = 0.15 ", "rate = 1.5 ", "progressive.meters[0]: rate 1.5 must be between 0 and 1"),
        (
            "baudrate = 115200",
            'baudrate = "fast"',
            "board.baudrate: Input should be a valid integer",
        ),
        (
            'driver = "serial"',
            'driver = "telepathy"',
            "board.driver: no board driver named 'telepathy'",
        ),
        ('paytable = "tcp-sd-1"', 'paytable = "nope"', "table.paytable: unknown paytable 'nope'"),
        ("port = 1883", "port = 99999", "mqtt.port: Input should be less than or equal to 65535"),
        ('lock = "LOCK"', 'lock = "OK"', "keypad"),
        ("[log]", "[logging]", "logging: unknown key"),
        ('id = "tcp-07"', 'id = "bad id!"', "table.id"),
        ("seed = 1000.00", "seed = 1000.0000001", "seed: '1000.0000001' is finer"),
        ("# wager = 1.00 ", "wager = 1.005 ", "progressive.wager: $1.005000 is finer than a cent"),
        (
            'paytable = "tcp-sd-1"',
            'paytable = "pmg-02"',
            "progressive.meters[0].seed: $1,000.00 differs from $5,000.00, the seed paytable "
            "pmg-02 requires at a $5.00 wager",
        ),
    ],
)
def test_a_bad_value_exits_2_naming_file_key_and_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, message: str
) -> None:
    text = EXAMPLE.read_text()
    assert old in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(old, new, 1))
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err
    assert message in err


def test_not_toml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.toml"
    bad.write_text("[table\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_daemon_config(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_daemon_config(tmp_path / "missing.toml")


def test_run_with_a_bad_config_exits_2_before_starting_anything(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[table]\nid = "t"\npaytable = "tcp-sd-1"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "progressived.cli.daemon", "run", "--config", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert f"{bad}: board: missing required key" in proc.stderr
