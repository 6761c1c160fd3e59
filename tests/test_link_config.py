"""The link controller's configuration and command line: clear errors, exit codes."""

from __future__ import annotations

import tomllib
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from progressived.cli import daemon
from progressived.config.table import ConfigError
from progressived.link.runtime.config import link_config_from, load_link_config
from tests.conftest import ROOT
from tests.link_harness import link_data

EXAMPLE = ROOT / "config" / "link.toml"


def value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return repr(v).replace("'", '"')


def write(tmp: Path, data: dict[str, Any]) -> Path:
    lines: list[str] = []
    meters = data["link"].pop("meters")
    for section, values in data.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {value(v)}" for k, v in values.items()]
    for meter in meters:
        lines.append("[[link.meters]]")
        lines += [f"{k} = {value(v)}" for k, v in meter.items()]
    path = tmp / "link.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_example_loads_with_hands_wager_and_seed_from_the_paytable() -> None:
    config = load_link_config(EXAMPLE)
    spec = config.params.meters[0]
    assert config.params.link_id == "link-a"
    assert spec.hands == {"royal-flush": Fraction(1), "straight-flush": Fraction(1, 10)}
    assert (spec.seed, spec.wager_base) == (1_000_000_000, 1_000_000)
    assert spec.rate == Fraction(15, 100)
    assert config.paytables[0].name == "pmg-01.toml"


def test_a_wager_override_scales_the_seed(tmp_path: Path) -> None:
    data = link_data(1883, tmp_path)
    data["link"]["meters"][0]["wager"] = Decimal("5.00")
    spec = link_config_from(data, tmp_path / "l.toml").params.meters[0]
    assert (spec.seed, spec.wager_base) == (5_000_000_000, 5_000_000)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["link"].update(colour="red"), "link.colour: unknown key"),
        (lambda d: d["link"]["meters"][0].update(seed="999.00"), r"link.meters\[0\].seed: .*20:18"),
        (lambda d: d["link"]["meters"][0].update(paytable="nope"), r"link.meters\[0\].paytable"),
        (lambda d: d["link"]["meters"][0].update(rate="0.99", reserve_rate="0.02"), "rates"),
        (lambda d: d["link"].update(tables=["t1", "t1"]), "link.tables: a table is listed twice"),
        (lambda d: d["link"].update(tables=["bad id"]), r"link.tables\[0\]"),
        (lambda d: d["link"].pop("tables"), "link.tables: missing required key"),
        (lambda d: d["mqtt"].update(port=0), "mqtt.port"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, change: Any, message: str) -> None:
    data = link_data(1883, tmp_path)
    change(data)
    with pytest.raises(ConfigError, match=message):
        link_config_from(data, tmp_path / "l.toml")


def test_a_bad_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = link_data(1883, tmp_path)
    data["link"]["heartbeat"] = 1
    path = write(tmp_path, data)
    assert daemon.main(["link", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"progressived: {path}: link.heartbeat: unknown key (did you mean 'heartbeat_s'?)"]


def test_a_missing_ledger_is_exit_3_for_every_verb(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, link_data(1883, tmp_path))
    assert daemon.main(["link", "--config", str(path)]) == 3
    assert daemon.main(["link", "--config", str(path), "--check"]) == 3
    assert daemon.main(["self-check", "--config", str(path)]) == 3
    assert daemon.main(["check-config", str(path)]) == 3
    err = capsys.readouterr().err
    assert "no link ledger at" in err and "progressived init --config" in err
    assert daemon.main(["check-config", "--file-only", str(path)]) == 0
    assert "ok (link link-a, meters pmg)" in capsys.readouterr().out


def test_the_example_is_valid_toml_with_the_documented_sections() -> None:
    data = tomllib.loads(EXAMPLE.read_text())
    assert set(data) == {"link", "mqtt", "ledger", "metrics", "control", "log"}
