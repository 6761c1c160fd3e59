"""``progressivectl par``: the contract (command, flags, JSON keys) for every paytable."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from progressived.cli.ctl import main
from progressived.config.paytables import available_paytables, find_paytable
from progressived.par.sheet import ParInputs, build_sheet, decimal_text

ALL_IDS = ["tcp-sd-1", "tcp-sd-2", "tcp-pa-5", "uth-01", "uth-02", "pmg-01", "pmg-02"]


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["par", *argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("paytable_id", ALL_IDS)
def test_json_contract(capsys: pytest.CaptureFixture[str], paytable_id: str) -> None:
    data = _json(capsys, paytable_id, "--meter", "5000", "--envy-players", "3")
    assert data["paytable"] == paytable_id
    assert isinstance(data["wager_cents"], int)
    hands = data["hands"]
    assert isinstance(hands, list)
    assert hands
    for row in hands:
        p = Fraction(row["probability"])
        assert 0 < p < 1
        assert "/" in row["probability"]
        assert isinstance(row["hand"], str)
    ret = data["return"]
    assert isinstance(ret, dict)
    assert Fraction(ret["fraction"]) > 0
    assert ret["decimal"].startswith(("0.", "1.", "2.", "3.", "4.", "5."))
    assert isinstance(data["break_even_meter_cents"], int)
    assert "envy_per_round_cents" in data
    assert data["long_run"] is None


def test_json_figures_tcp_sd_1(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(
        capsys,
        "tcp-sd-1",
        "--meter",
        "$1,000",
        "--envy-players",
        "2",
        "--meter-rate",
        "0.15",
        "--reserve-rate",
        "0.02",
        "--seed",
        "1000",
    )
    assert data["wager_cents"] == 100
    assert data["return"] == {
        "fraction": "651/1105",  # (12,020 fixed + 1,000 meter) / 22,100
        "decimal": "0.589140271493",
        "percent": "58.914027",
    }
    assert data["break_even_meter_cents"] == 1_008_000
    # 2 x (1 x $100 + 3 x $25) / 22,100 = 35,000 cents / 22,100
    assert Fraction(data["envy_per_round_units"]) == Fraction(2 * 17_500 * 10_000, 22_100)
    assert data["envy_per_round_cents"] == "1.5837"
    long_run = data["long_run"]
    assert isinstance(long_run, dict)
    assert long_run["average_meter_at_hit_cents"] == str(100_000 + 17 * 22_100) + ".0000"


def test_text_output_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["par", "uth-01"]) == 0
    out = capsys.readouterr().out
    assert "royal-flush-first-5" in out
    assert "break-even meter" in out
    assert main(["par", "no-such-table"]) == 2
    assert "unknown paytable" in capsys.readouterr().err
    assert main(["par", "tcp-sd-1", "--meter-rate", "0.9", "--reserve-rate", "0.2"]) == 2
    assert main(["par", "pmg-01"]) == 0
    out = capsys.readouterr().out
    assert "WARNING" not in out  # read on the first five cards (docs/par.md section 6)
    assert "cards = first-five" in out


@pytest.mark.parametrize(
    ("paytable_id", "cards"),
    [("tcp-sd-1", "three-card"), ("uth-01", "best-of-seven"), ("pmg-02", "first-five")],
)
def test_json_states_the_cards_reading(
    capsys: pytest.CaptureFixture[str], paytable_id: str, cards: str
) -> None:
    data = _json(capsys, paytable_id)
    assert data["cards"] == cards
    readings = data["readings"]
    assert isinstance(readings, list)
    assert f"(cards = {cards})" in readings[0]


def test_every_shipped_paytable_is_covered() -> None:
    assert sorted(ALL_IDS) == available_paytables()


DOCS = Path(__file__).resolve().parent.parent / "docs" / "par.md"


def test_docs_figures_table_matches_the_sheet() -> None:
    """docs/par.md section 6 quotes returns and break-even meters: keep them true."""
    rows = {}
    for line in DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells and cells[0] in ALL_IDS and len(cells) == 6:
            rows[cells[0]] = cells
    assert sorted(rows) == sorted(ALL_IDS)
    for table_id, cells in rows.items():
        sheet = build_sheet(find_paytable(table_id), ParInputs(envy_players=1))
        assert cells[1].strip("*") == decimal_text(sheet.player_return * 100, 3) + "%"
        assert sheet.break_even_meter is not None
        if sheet.warnings:
            assert cells[2].startswith("$0")
        else:
            cents = -(-sheet.break_even_meter // 10_000)
            assert cells[2] == f"${cents // 100:,}.{cents % 100:02d}"
