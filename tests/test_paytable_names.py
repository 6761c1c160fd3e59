"""What players read: each paytable's title and each hand's name (docs/paytables.md).

The shipped files take the names their rule text prints (a sign or rack card must say what
the regulator approved), a file that names nothing gets the built-in names, and a name a
sign could not show (empty, too long, control characters) is refused naming file and key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from progressived.config.paytables import Hand, PaytableError, load_all, load_paytable
from progressived.core.paytable import GAME_TITLES, HAND_NAMES, Game
from tests.conftest import PAYTABLES
from tests.test_paytables import GOOD, write

# The words each schedule prints for its hands (../shared/rules/: S.D. 20:18:16:15.02(16) and
# 15.15(18), the PA rack card's "PROGRESSIVE WAGER" table), in the paytable's order.
SD_TCP = [
    "AKQ Spades", "AKQ Diamonds/Hearts/Clubs", "Straight Flush", "Three of a Kind", "Straight",
]  # fmt: skip
PMG = [
    "Royal Flush", "Straight Flush", "4 of a Kind", "Full House", "Flush", "Straight",
    "3 of a Kind",
]  # fmt: skip
UTH_01 = [
    "Royal Flush - First 5 Cards", "Royal Flush - First 7 Cards", "Community Royal",
    "Straight Flush", "4 of a Kind", "Full House",
]  # fmt: skip
RULE_WORDS = {
    "tcp-sd-1": ("Three Card Poker Progressive", SD_TCP),
    "tcp-sd-2": ("Three Card Poker Progressive", SD_TCP[:4]),
    "tcp-pa-5": (
        "Three Card Poker Progressive",
        ["A,K,Q Spades", "A,K,Q (Other Suits)", "Straight Flush", "Three-of-a-Kind", "Straight"],
    ),
    "uth-01": (
        "Ultimate Texas Hold'em Progressive",
        UTH_01,
    ),
    "uth-02": (
        "Ultimate Texas Hold'em Progressive",
        ["Royal Flush", "Community Royal Flush", "Straight Flush", "4 of a Kind", "Full House"],
    ),
    "pmg-01": ("Multi-Link Game Progressive", PMG),
    "pmg-02": ("Multi-Link Game Progressive", PMG),
}


def test_every_shipped_hand_is_named_as_its_rule_text_prints_it() -> None:
    tables = load_all(PAYTABLES)
    assert sorted(tables) == sorted(RULE_WORDS)
    for pid, table in tables.items():
        title, hands = RULE_WORDS[pid]
        assert (table.title, [r.name for r in table.hands]) == (title, hands), pid


def test_a_file_without_names_gets_the_built_in_ones(tmp_path: Path) -> None:
    table = load_paytable(write(tmp_path, GOOD))
    assert [r.name for r in table.hands] == [HAND_NAMES[Hand.AKQ_SPADES], "Straight"]
    assert table.title == GAME_TITLES[Game.THREE_CARD_POKER] == "Three Card Poker"
    assert set(HAND_NAMES) == set(Hand) and set(GAME_TITLES) == set(Game)


def test_names_given_are_kept(tmp_path: Path) -> None:
    named = GOOD.replace('pays = "100%"', 'pays = "100%"\nname = "Mini Royal"').replace(
        'game = "three-card-poker"', 'game = "three-card-poker"\ntitle = "Three Card Jackpot"'
    )
    table = load_paytable(write(tmp_path, named))
    assert table.hands[0].name == "Mini Royal" and table.title == "Three Card Jackpot"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (('pays = "100%"', 'pays = "100%"\nname = ""'), "hands[0].name"),
        (('pays = "100%"', 'pays = "100%"\nname = "  "'), "hands[0].name"),
        (('pays = "100%"', 'pays = "100%"\nname = "' + "x" * 41 + '"'), "hands[0].name"),
        (('pays = "100%"', 'pays = "100%"\nname = "bell\\u0007"'), "hands[0].name"),
        (("wager = 1.00", 'wager = 1.00\ntitle = ""'), "title"),
        (("wager = 1.00", 'wager = 1.00\ntitle = "' + "t" * 61 + '"'), "title"),
    ],
)
def test_a_name_a_sign_cannot_show_is_refused(
    tmp_path: Path, change: tuple[str, str], key: str
) -> None:
    path = write(tmp_path, GOOD.replace(*change, 1))
    with pytest.raises(PaytableError) as caught:
        load_paytable(path)
    assert str(caught.value).startswith(f"{path}: {key}: "), caught.value
