"""progressived.testing, the doubles other code imports: the configuration it writes is one
the daemon accepts, and the board simulator is found through its entry point."""

from __future__ import annotations

import tomllib
from decimal import Decimal
from pathlib import Path

import pytest
from progressived_drivers.board_sim import BoardSimulator

from progressived.config.daemon import load_daemon_config
from progressived.testing import board
from progressived.testing.config import RigConfig, render_toml, write_config


def test_render_toml_round_trips_tables_arrays_and_values(tmp_path: Path) -> None:
    text = render_toml(
        {
            "a": {"s": 'say "hi"\\', "i": 3, "f": 0.15, "d": Decimal("1000.00"), "b": True},
            "x.y": [{"id": "one"}, {"id": "two"}],
            "p": {"path": tmp_path / "ledger.db"},
        },
        header="# made here",
    )
    assert text.startswith("# made here\n[a]\n")
    assert "d = 1000.00\n" in text
    assert tomllib.loads(text) == {
        "a": {"s": 'say "hi"\\', "i": 3, "f": 0.15, "d": 1000.0, "b": True},
        "x": {"y": [{"id": "one"}, {"id": "two"}]},
        "p": {"path": str(tmp_path / "ledger.db")},
    }


def test_written_config_is_one_the_daemon_accepts(tmp_path: Path) -> None:
    spec = RigConfig(table="t-9", board={"heartbeat_interval_s": 0.3}, metrics_port=9555)
    path = write_config(
        tmp_path, spec, broker_host="127.0.0.1", broker_port=18830, link=tmp_path / "board"
    )
    loaded = load_daemon_config(path)
    data = tomllib.loads(path.read_text())
    assert data["table"]["id"] == "t-9"
    assert data["board"] == {
        "driver": "serial", "port": str(tmp_path / "board"), "heartbeat_interval_s": 0.3,
    }
    assert data["ledger"]["path"] == str(tmp_path / "ledger.db")
    assert data["control"]["socket"] == str(tmp_path / "control.sock")
    assert loaded.metrics.port == 9555


def test_simulator_comes_from_the_entry_point(tmp_path: Path) -> None:
    sim = board.simulator(tmp_path / "board", seats=5, heartbeat_interval_s=0.4)
    assert isinstance(sim, BoardSimulator)
    assert sim.seats == 5


def test_no_simulator_installed_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(board, "ENTRY_POINT_GROUP", "progressived.no-such-group")
    with pytest.raises(board.NoSimulator, match="no board simulator"):
        board.simulator(tmp_path / "board")
