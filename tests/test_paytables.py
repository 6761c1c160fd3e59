"""Paytables as data: the shipped files, and errors that name file, key and reason."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from progressived.config.paytables import (
    Cards,
    Hand,
    PayKind,
    PaytableError,
    find_paytable,
    load_all,
    load_paytable,
)
from progressived.core.money import UNITS_PER_DOLLAR as DOLLAR
from tests.conftest import PAYTABLES

IDS = ["tcp-sd-1", "tcp-sd-2", "tcp-pa-5", "uth-01", "uth-02", "pmg-01", "pmg-02"]


def test_every_contracted_paytable_ships_and_loads() -> None:
    tables = load_all(PAYTABLES)
    assert sorted(tables) == sorted(IDS)
    for table in tables.values():
        assert table.rule and table.envy_rule, f"{table.id} must cite its rule"


def test_pa_rack_card_values() -> None:
    t = find_paytable("tcp-pa-5", PAYTABLES)
    assert t.wager == 5 * DOLLAR
    spades = t.rule_for(Hand.AKQ_SPADES)
    assert spades is not None
    assert spades.pay.kind is PayKind.PERCENT_OF_METER and spades.pay.percent == 1
    assert spades.envy == 500 * DOLLAR
    fixed = {r.hand.value: r.pay.amount for r in t.hands if r.pay.kind is PayKind.FIXED}
    assert fixed == {
        "akq-suited": 2500 * DOLLAR,
        "straight-flush": 350 * DOLLAR,
        "three-of-a-kind": 300 * DOLLAR,
        "straight": 30 * DOLLAR,
    }
    assert t.envy_requires_trigger_wager is False


def test_sd_three_card_requires_the_trigger_to_wager_and_uth_does_not() -> None:
    assert find_paytable("tcp-sd-1", PAYTABLES).envy_requires_trigger_wager is True
    assert find_paytable("tcp-sd-2", PAYTABLES).envy_requires_trigger_wager is True
    for pid in ("uth-01", "uth-02", "pmg-01", "pmg-02"):
        assert find_paytable(pid, PAYTABLES).envy_requires_trigger_wager is False


def test_uthp_01_percentages_and_odds() -> None:
    t = find_paytable("uth-01", PAYTABLES)
    first5, royal, community = (
        t.rule_for(Hand.ROYAL_FLUSH_FIRST_5),
        t.rule_for(Hand.ROYAL_FLUSH),
        t.rule_for(Hand.COMMUNITY_ROYAL),
    )
    assert first5 is not None and royal is not None and community is not None
    assert first5.pay.percent == 1 and royal.pay.percent == Fraction(5, 100)
    assert community.pay.kind is PayKind.TO_ONE and community.pay.multiple == 3000


def test_pmg_schedules_scale_envy_with_the_wager() -> None:
    one, five = find_paytable("pmg-01", PAYTABLES), find_paytable("pmg-02", PAYTABLES)
    assert (one.wager, five.wager) == (DOLLAR, 5 * DOLLAR)
    for hand, e1, e5 in ((Hand.ROYAL_FLUSH, 1000, 5000), (Hand.STRAIGHT_FLUSH, 300, 1500)):
        r1, r5 = one.rule_for(hand), five.rule_for(hand)
        assert r1 is not None and r5 is not None
        assert (r1.envy, r5.envy) == (e1 * DOLLAR, e5 * DOLLAR)
    sf = one.rule_for(Hand.STRAIGHT_FLUSH)
    assert sf is not None and sf.pay.percent == Fraction(1, 10)


def test_every_paytable_states_which_cards_its_hands_are_read_on() -> None:
    tables = load_all(PAYTABLES)
    assert {pid: t.cards for pid, t in tables.items()} == {
        "tcp-sd-1": Cards.THREE_CARD,
        "tcp-sd-2": Cards.THREE_CARD,
        "tcp-pa-5": Cards.THREE_CARD,
        "uth-01": Cards.BEST_OF_SEVEN,
        "uth-02": Cards.BEST_OF_SEVEN,
        "pmg-01": Cards.FIRST_FIVE,
        "pmg-02": Cards.FIRST_FIVE,
    }
    for path in sorted(PAYTABLES.glob("*.toml")):  # written out, not left to the default
        assert f'\ncards = "{tables[path.stem].cards.value}"\n' in path.read_text()
    for pid in ("pmg-01", "pmg-02"):
        text = " ".join(tables[pid].notes)
        assert "two hole cards and the three flop cards" in text
        assert "royal-flush: any royal flush in those five cards" in text
        royal = tables[pid].rule_for(Hand.ROYAL_FLUSH)
        assert royal is not None


def test_cards_defaults_by_game(tmp_path: Path) -> None:
    assert load_paytable(write(tmp_path, GOOD)).cards is Cards.THREE_CARD
    uth = GOOD.replace('"three-card-poker"', '"ultimate-texas-holdem"').replace(
        '"akq-spades"', '"royal-flush"'
    )
    assert load_paytable(write(tmp_path, uth)).cards is Cards.BEST_OF_SEVEN
    five = uth.replace("wager = 1.00", 'wager = 1.00\ncards = "first-five"')
    assert load_paytable(write(tmp_path, five)).cards is Cards.FIRST_FIVE


GOOD = """
id = "x-1"
name = "test"
game = "three-card-poker"
rule = "test rule"
wager = 1.00
envy_requires_trigger_wager = true
envy_rule = "test envy rule"
[[hands]]
hand = "akq-spades"
pays = "100%"
[[hands]]
hand = "straight"
pays = "6 for 1"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "x-1.toml"
    path.write_text(text)
    return path


def test_a_good_file_loads(tmp_path: Path) -> None:
    assert load_paytable(write(tmp_path, GOOD)).hand_ids == ("akq-spades", "straight")


@pytest.mark.parametrize(
    ("change", "key", "reason"),
    [
        (('hand = "straight"', 'hand = "five-aces"'), "hands[1].hand", "unknown hand 'five-aces'"),
        (('pays = "6 for 1"', 'pays = "-6 for 1"'), "hands[1] (straight).pays", "negative pay"),
        (('pays = "100%"', 'pays = "120%"'), "hands[0] (akq-spades).pays", "above 100%"),
        (
            ('hand = "straight"', 'hand = "akq-spades"'),
            "(top level)",
            "duplicate hand 'akq-spades'",
        ),
        (('rule = "test rule"\n', ""), "rule", "missing required field"),
        (
            ('pays = "6 for 1"', 'pays = "six for one"'),
            "hands[1] (straight).pays",
            "cannot read pay",
        ),
        (("wager = 1.00", "wager = 1.00\ncolour = 1"), "colour", "unknown key"),
        (
            ("wager = 1.00", 'wager = 1.00\ncards = "best-of-five"'),
            "cards",
            "unknown reading 'best-of-five'",
        ),
        (
            ("wager = 1.00", 'wager = 1.00\ncards = "first-five"'),
            "cards",
            "'first-five' does not fit game 'three-card-poker'",
        ),
        (("wager = 1.00", "wager = 1.005"), "wager", "$1.005000 is finer than a cent"),
        (("wager = 1.00", "wager = 1.00\nmax_hands_per_player = 2"), "hands_per_player_rule", "cite"),
        (("wager = 1.00", "wager = 1.00\nseed = 1000.00"), "seed_rule", "cite"),
        (("wager = 1.00", 'wager = 1.00\nseed = 0\nseed_rule = "r"'), "seed", "must be positive"),
        (("wager = 1.00", "wager = 1.00\nmax_hands_per_player = 0"), "max_hands_per_player", ""),
    ],
)
def test_bad_paytables_name_file_key_and_reason(
    tmp_path: Path, change: tuple[str, str], key: str, reason: str
) -> None:
    path = write(tmp_path, GOOD.replace(*change, 1))
    with pytest.raises(PaytableError) as info:
        load_paytable(path)
    message = str(info.value)
    assert str(path) in message
    assert key in message
    assert reason in message


UTH = GOOD.replace('"three-card-poker"', '"ultimate-texas-holdem"').replace(
    '"akq-spades"', '"royal-flush"'
)


@pytest.mark.parametrize(
    ("change", "key", "reason"),
    [
        (
            ("wager = 1.00", 'wager = 1.00\ncards = "three-card"'),
            "cards",
            "'three-card' does not fit game 'ultimate-texas-holdem'",
        ),
        (
            ('hand = "royal-flush"', 'hand = "akq-spades"'),
            "hands[0] (akq-spades).hand",
            "cannot occur when cards = 'best-of-seven'",
        ),
        (
            ("wager = 1.00\n", 'wager = 1.00\ncards = "first-five"\n'),
            "hands[1] (community-royal).hand",
            "cannot occur when cards = 'first-five'",
        ),
    ],
)
def test_bad_readings_name_file_key_and_reason(
    tmp_path: Path, change: tuple[str, str], key: str, reason: str
) -> None:
    text = UTH.replace('hand = "straight"', 'hand = "community-royal"').replace(
        '"6 for 1"', '"1,000 to 1"'
    )
    path = write(tmp_path, text.replace(*change, 1))
    with pytest.raises(PaytableError) as info:
        load_paytable(path)
    message = str(info.value)
    assert str(path) in message
    assert key in message
    assert reason in message


def test_not_toml_and_wrong_file_name(tmp_path: Path) -> None:
    bad = tmp_path / "x-1.toml"
    bad.write_text("id = ")
    with pytest.raises(PaytableError, match="not valid TOML"):
        load_paytable(bad)
    other = tmp_path / "other.toml"
    other.write_text(GOOD)
    with pytest.raises(PaytableError, match="does not match the file name"):
        load_paytable(other)


def test_unknown_paytable_lists_the_available_ones() -> None:
    with pytest.raises(PaytableError, match=r"unknown paytable 'nope'.*tcp-sd-1"):
        find_paytable("nope", PAYTABLES)


def test_sd_three_card_poker_allows_two_hands_per_player_citing_the_rule() -> None:
    for paytable_id in ("tcp-sd-1", "tcp-sd-2"):
        t = find_paytable(paytable_id, PAYTABLES)
        assert t.max_hands_per_player == 2
        assert t.hands_per_player_rule.startswith("20:18:16:15.02(1)")
        assert "up to two hands" in t.hands_per_player_rule
    assert find_paytable("tcp-pa-5", PAYTABLES).max_hands_per_player is None


def test_pmg_schedules_state_a_seed_that_follows_the_wager() -> None:
    one, five = find_paytable("pmg-01", PAYTABLES), find_paytable("pmg-02", PAYTABLES)
    assert (one.seed, five.seed) == (1000 * DOLLAR, 5000 * DOLLAR)
    for t in (one, five):
        assert "seed amounts adjust up or down" in t.seed_rule
    for other in ("tcp-sd-1", "tcp-pa-5", "uth-01", "uth-02"):
        assert find_paytable(other, PAYTABLES).seed is None
