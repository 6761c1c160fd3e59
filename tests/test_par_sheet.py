"""Sheet figures recomputed independently: the sheet takes three-card probabilities from
the full enumeration and five- and seven-card ones from the closed forms, so these tests
take them from the other method, map hands by hand (not through the outcome chains) and pay
them straight from the paytable rows."""

from __future__ import annotations

import dataclasses
import random
from fractions import Fraction
from functools import cache
from pathlib import Path

import pytest

from progressived.config.paytables import Cards, PayKind, Paytable, find_paytable, load_all
from progressived.core.money import UNITS_PER_DOLLAR
from progressived.par import five_card, holdem, three_card
from progressived.par.sheet import (
    ParError,
    ParInputs,
    average_meter_at_hit,
    build_sheet,
    decimal_text,
    return_at,
)

DOLLAR = UNITS_PER_DOLLAR
ALL_IDS = ["tcp-sd-1", "tcp-sd-2", "tcp-pa-5", "uth-01", "uth-02", "pmg-01", "pmg-02"]


@cache
def _seven_card() -> tuple[dict[str, int], dict[str, Fraction]]:
    return holdem.class_counts(), holdem.royal_split_by_position()


@cache
def _first_five() -> dict[str, int]:
    return five_card.class_counts()


@cache
def _other_three_card(cls: str) -> Fraction:
    return three_card.other_player_given_hand(cls)


def _independent_probabilities(paytable_id: str) -> dict[str, Fraction]:
    if paytable_id.startswith("tcp"):
        counts = three_card.closed_form_counts()
        return {k: Fraction(v, three_card.TOTAL) for k, v in counts.items()}
    if paytable_id.startswith("pmg"):  # cards = first-five: hole cards and flop only
        return {k: Fraction(v, five_card.TOTAL) for k, v in _first_five().items()}
    counts, split = _seven_card()
    p = {k: Fraction(v, holdem.TOTAL) for k, v in counts.items()}
    first5, board, other = (
        split[holdem.FIRST_5],
        split[holdem.COMMUNITY],
        split[holdem.OTHER_ROYAL],
    )
    if paytable_id == "uth-01":
        p["royal-flush-first-5"], p["royal-flush"], p["community-royal"] = first5, other, board
    else:
        assert paytable_id == "uth-02"
        p["royal-flush"], p["community-royal"] = first5 + other, board
    return p


def _pay(paytable: Paytable, hand: str, meter: Fraction) -> Fraction:
    rule = paytable.rule_for(hand)
    assert rule is not None
    w = paytable.wager
    if rule.pay.kind is PayKind.PERCENT_OF_METER:
        return rule.pay.percent * meter
    if rule.pay.kind is PayKind.FOR_ONE:
        return Fraction(rule.pay.multiple * w)
    if rule.pay.kind is PayKind.TO_ONE:
        return Fraction((rule.pay.multiple + 1) * w)
    return Fraction(rule.pay.amount)


@pytest.fixture(scope="module")
def tables(paytables_dir: Path) -> dict[str, Paytable]:
    return load_all(paytables_dir)


@pytest.fixture(scope="module")
def paytables_dir() -> Path:  # module scope for the module-scoped fixture above
    return Path(__file__).resolve().parent.parent / "config" / "paytables"


@pytest.mark.parametrize("paytable_id", ALL_IDS)
def test_probabilities_and_return_two_ways(tables: dict[str, Paytable], paytable_id: str) -> None:
    table = tables[paytable_id]
    probs = _independent_probabilities(paytable_id)
    for meter_dollars in (0, 1_000, 25_000):
        meter = meter_dollars * DOLLAR
        sheet = build_sheet(table, ParInputs(meter=meter))
        expected = Fraction(0)
        for line in sheet.lines:
            assert line.probability == probs[line.hand.value], line.hand
            expected += probs[line.hand.value] * _pay(table, line.hand.value, Fraction(meter))
        assert sheet.player_return == expected / table.wager
        assert sum((ln.return_share for ln in sheet.lines), Fraction(0)) == sheet.player_return


@pytest.mark.parametrize("paytable_id", ALL_IDS)
def test_break_even_meter(tables: dict[str, Paytable], paytable_id: str) -> None:
    sheet = build_sheet(tables[paytable_id], ParInputs())
    assert sheet.break_even_meter is not None  # every shipped paytable has a meter pay
    if sheet.tray_return < 1:
        assert return_at(sheet, sheet.break_even_meter) == 1
        assert return_at(sheet, sheet.break_even_meter - 1) < 1
    else:
        assert sheet.break_even_meter == 0
        assert sheet.warnings


def test_tcp_sd_1_figures_by_hand(tables: dict[str, Paytable]) -> None:
    sheet = build_sheet(tables["tcp-sd-1"], ParInputs(meter=1_000 * DOLLAR))
    # fixed: 3 x 500 + 44 x 70 + 52 x 60 + 720 x 6 = 12,020 per 22,100 hands
    assert sheet.tray_return == Fraction(12_020, 22_100)
    assert sheet.player_return == Fraction(12_020 + 1_000, 22_100)
    assert sheet.break_even_meter == (22_100 - 12_020) * DOLLAR
    assert not sheet.warnings


def test_envy_tcp_by_conditioning_on_the_bettors_hand(tables: dict[str, Paytable]) -> None:
    table = tables["tcp-sd-1"]
    for n in range(7):
        sheet = build_sheet(table, ParInputs(envy_players=n, non_bettors=3))
        expected = n * (
            _other_three_card("akq-spades") * 100 * DOLLAR
            + _other_three_card("akq-suited") * 25 * DOLLAR
        )
        assert sheet.envy_per_round == expected  # non-bettors: the trigger must wager here
    pa = build_sheet(tables["tcp-pa-5"], ParInputs(envy_players=2, non_bettors=3))
    assert pa.envy_triggers == 5
    assert pa.envy_per_round == 5 * Fraction(500 * DOLLAR + 3 * 125 * DOLLAR, 22_100)


def test_envy_holdem_by_conditioning_on_the_bettors_hole_cards(
    tables: dict[str, Paytable],
) -> None:
    # pmg reads the other player's hand on their first five cards (hole cards and flop)
    conditional = five_card.other_player_given_hole_cards()
    for table_id, scale in (("pmg-01", 1), ("pmg-02", 5)):
        sheet = build_sheet(tables[table_id], ParInputs(envy_players=4, non_bettors=1))
        expected = (
            5
            * scale
            * (
                conditional[holdem.ROYAL] * 1_000 * DOLLAR
                + conditional[holdem.STRAIGHT_FLUSH] * 300 * DOLLAR
            )
        )
        assert sheet.envy_per_round == expected
    assert build_sheet(tables["uth-01"], ParInputs(envy_players=5)).envy_per_round == 0


def test_long_run_without_partial_pays(tables: dict[str, Paytable]) -> None:
    table = tables["tcp-sd-1"]
    r, q, seed = Fraction(15, 100), Fraction(2, 100), 1_000 * DOLLAR
    sheet = build_sheet(table, ParInputs(meter_rate=r, reserve_rate=q, seed=seed))
    lr = sheet.long_run
    assert lr is not None
    # renewal argument: a hit every 22,100 wagers on average, each adding (r+q) x $1
    assert lr.average_meter_at_hit == seed + (r + q) * DOLLAR * 22_100
    assert lr.player_return == sheet.tray_return + r + q + Fraction(seed, 22_100 * DOLLAR)
    assert lr.hold == 1 - lr.player_return


@pytest.mark.parametrize("paytable_id", ALL_IDS)
def test_long_run_return_is_the_return_at_the_average_meter(
    tables: dict[str, Paytable], paytable_id: str
) -> None:
    inputs = ParInputs(
        meter_rate=Fraction(1, 10), reserve_rate=Fraction(1, 50), seed=2_000 * DOLLAR
    )
    sheet = build_sheet(tables[paytable_id], inputs)
    assert sheet.long_run is not None
    average = sheet.long_run.average_meter_at_hit
    assert average is not None
    assert return_at(sheet, average) == sheet.long_run.player_return


def test_average_meter_formula_against_a_simulation() -> None:
    """A meter with a 100% pay (2%) and a 10% pay (5%) run for 300,000 wagers."""
    seed = 20_000_000  # units; a $1 wager is 1,000,000
    meter_part, reserve_part = 100_000, 50_000  # rates 0.10 and 0.05 of the wager
    rng = random.Random(8)
    meter, reserve, at_hits = seed, 0, []
    for _ in range(300_000):
        meter += meter_part
        reserve += reserve_part
        roll = rng.randrange(1000)
        if roll < 20:
            at_hits.append(meter)
            meter, reserve = seed + reserve, 0
        elif roll < 70:
            meter -= meter // 10
    formula = average_meter_at_hit(
        Fraction(20, 1000),
        Fraction(20, 1000) + Fraction(50, 1000) * Fraction(1, 10),
        Fraction(meter_part + reserve_part),
        seed,
    )
    assert formula is not None
    simulated = Fraction(sum(at_hits), len(at_hits))
    assert abs(simulated / formula - 1) < Fraction(3, 100)


def test_bad_inputs(tables: dict[str, Paytable]) -> None:
    table = tables["tcp-sd-1"]
    with pytest.raises(ParError):
        build_sheet(table, ParInputs(envy_players=12))
    with pytest.raises(ParError):
        build_sheet(table, ParInputs(meter_rate=Fraction(9, 10), reserve_rate=Fraction(2, 10)))
    with pytest.raises(ParError):
        build_sheet(table, ParInputs(meter=-1))


def test_readings_state_the_royal_splits(tables: dict[str, Paytable]) -> None:
    uth1 = build_sheet(tables["uth-01"], ParInputs())
    assert any("community cards: paid as community-royal" in r for r in uth1.readings)
    assert "cards = best-of-seven" in uth1.readings[0]
    pmg = build_sheet(tables["pmg-01"], ParInputs())
    assert "two hole cards and the three flop cards" in pmg.readings[0]
    assert "cards = first-five" in pmg.readings[0]
    assert not any("community" in r for r in pmg.readings)  # no board royal on five cards
    assert find_paytable("uth-02").rule_for("royal-flush-first-5") is None
    uth2 = build_sheet(tables["uth-02"], ParInputs())
    assert any("hole cards and the flop: paid as royal-flush" in r for r in uth2.readings)


def test_pmg_on_the_first_five_cards_returns_less_than_the_wager(
    tables: dict[str, Paytable],
) -> None:
    """The fixed pays over C(52,5) hands, written out; the meter pays on top."""
    tray = Fraction(624 * 300 + 3_744 * 50 + 5_108 * 40 + 10_200 * 30 + 54_912 * 9, 2_598_960)
    for table_id in ("pmg-01", "pmg-02"):
        table = tables[table_id]
        sheet = build_sheet(table, ParInputs(meter=1_000 * DOLLAR))
        assert sheet.tray_return == tray
        meter_part = (Fraction(4) + Fraction(36, 10)) * 1_000 * DOLLAR / (2_598_960 * table.wager)
        assert sheet.player_return == tray + meter_part
        assert sheet.player_return < 1
        assert not sheet.warnings


def test_pmg_read_on_seven_cards_would_return_several_times_the_wager(
    tables: dict[str, Paytable],
) -> None:
    """Why the reading matters: the same schedule on the best five of seven cards."""
    for table_id, quoted in (("pmg-01", "489.312"), ("pmg-02", "484.499")):  # docs/par.md
        seven = dataclasses.replace(tables[table_id], cards=Cards.BEST_OF_SEVEN)
        sheet = build_sheet(seven, ParInputs(meter=1_000 * DOLLAR))
        assert sheet.tray_return > 4
        assert sheet.warnings
        assert decimal_text(sheet.player_return * 100, 3) == quoted
