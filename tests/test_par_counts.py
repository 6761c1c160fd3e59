"""Hand counts, each two independent ways, plus the published five- and seven-card counts."""

from __future__ import annotations

import random
from fractions import Fraction
from itertools import combinations
from math import comb

import pytest

from progressived.par import five_card, holdem, three_card
from progressived.par.cards import ACE, has_straight, rank_mask

# One worker runs the whole module under pytest-xdist (.ci/test: --dist loadgroup):
# the module-scoped enumeration of every seven-card set is done once.
pytestmark = pytest.mark.xdist_group("holdem-counts")


def test_three_card_enumeration_matches_closed_form() -> None:
    assert three_card.enumerate_counts() == three_card.closed_form_counts()


def test_three_card_counts_are_the_known_ones() -> None:
    counts = three_card.closed_form_counts()
    assert counts == {
        "akq-spades": 1,
        "akq-suited": 3,
        "straight-flush": 44,
        "three-of-a-kind": 52,
        "straight": 720,
        "flush": 1096,
    }
    assert three_card.TOTAL == 22_100


@pytest.mark.parametrize(
    ("hand", "expected"),
    [
        ((ACE * 4, (ACE - 1) * 4, (ACE - 2) * 4), "akq-spades"),
        ((ACE * 4 + 1, (ACE - 1) * 4 + 1, (ACE - 2) * 4 + 1), "akq-suited"),
        ((ACE * 4 + 2, 0 * 4 + 2, 1 * 4 + 2), "straight-flush"),  # A-2-3 suited
        ((ACE * 4, 0 * 4 + 1, 1 * 4 + 2), "straight"),  # A-2-3
        ((ACE * 4, (ACE - 1) * 4 + 1, (ACE - 2) * 4 + 2), "straight"),  # A-K-Q
        ((ACE * 4, 0 * 4 + 1, (ACE - 1) * 4 + 2), None),  # K-A-2 is no straight
        ((5 * 4, 5 * 4 + 1, 5 * 4 + 3), "three-of-a-kind"),
        ((0, 8, 20), "flush"),
    ],
)
def test_three_card_classify(hand: tuple[int, ...], expected: str | None) -> None:
    assert three_card.classify(hand) == expected


def test_straight_masks() -> None:
    assert has_straight(rank_mask([ACE, 0, 1, 2, 3]))
    assert has_straight(rank_mask([8, 9, 10, 11, ACE]))
    assert not has_straight(rank_mask([ACE - 2, ACE - 1, ACE, 0, 1]))  # Q-K-A-2-3
    assert holdem.rank_sets_with_straight(5) == 10


PUBLISHED_SEVEN_CARD = {  # third check: the counts every poker table publishes
    "royal-flush": 4_324,
    "straight-flush": 37_260,
    "four-of-a-kind": 224_848,
    "full-house": 3_473_184,
    "flush": 4_047_644,
    "straight": 6_180_020,
    "three-of-a-kind": 6_461_620,
    "two-pair": 31_433_400,
    "pair": 58_627_800,
    "high-card": 23_294_460,
}


@pytest.fixture(scope="module")
def class_counts() -> dict[str, int]:
    return holdem.class_counts()


def test_holdem_enumeration_covers_every_seven_card_set(class_counts: dict[str, int]) -> None:
    assert sum(class_counts.values()) == comb(52, 7) == holdem.TOTAL


def test_holdem_enumeration_matches_closed_form(class_counts: dict[str, int]) -> None:
    closed = holdem.closed_form_counts()
    assert set(closed) == set(holdem.PAYING)
    for category, count in closed.items():
        assert class_counts[category] == count, category


def test_holdem_counts_match_published(class_counts: dict[str, int]) -> None:
    assert class_counts == PUBLISHED_SEVEN_CARD


def _brute_best(cards: tuple[int, ...]) -> str:
    """An independent, slow evaluator: best category over all 21 five-card subsets."""
    order = list(holdem.CATEGORIES)
    best = len(order) - 1
    for five in combinations(cards, 5):
        ranks = sorted(c // 4 for c in five)
        suits = {c % 4 for c in five}
        counts = sorted((ranks.count(r) for r in set(ranks)), reverse=True)
        straight = len(set(ranks)) == 5 and (ranks[4] - ranks[0] == 4 or ranks == [0, 1, 2, 3, ACE])
        if straight and len(suits) == 1:
            cat = "royal-flush" if ranks[0] == ACE - 4 else "straight-flush"
        elif counts[0] == 4:
            cat = "four-of-a-kind"
        elif counts[:2] == [3, 2]:
            cat = "full-house"
        elif len(suits) == 1:
            cat = "flush"
        elif straight:
            cat = "straight"
        elif counts[0] == 3:
            cat = "three-of-a-kind"
        elif counts[:2] == [2, 2]:
            cat = "two-pair"
        elif counts[0] == 2:
            cat = "pair"
        else:
            cat = "high-card"
        best = min(best, order.index(cat))
    return order[best]


def test_class_rules_agree_with_brute_force() -> None:
    """The rules class counting applies, hand by hand, against a best-of-21 evaluator."""
    rng = random.Random(20261121)
    samples = [tuple(rng.sample(range(52), 7)) for _ in range(2500)]
    # and hands built to sit on the edges: wheels, royals, six-card straight flushes,
    # flush plus straight in other suits, two trips
    samples += [
        (ACE * 4, 0, 4, 8, 12, 30, 51),  # A-2-3-4-5 of spades: wheel straight flush
        (ACE * 4, 44, 40, 36, 32, 1, 2),  # royal of spades
        (4, 8, 12, 16, 20, 24, 51),  # 3..8 of spades: eight-high straight flush
        (0, 8, 20, 28, 44, 13, 17),  # a spade flush, two off-suit cards
        (0, 1, 2, 20, 21, 22, 51),  # two trips
        (48, 44, 40, 36, 33, 29, 1),  # A-K-Q-J spades, T hearts, 9 clubs
    ]
    for cards in samples:
        assert holdem.classify_best_five(cards) == _brute_best(cards), cards


PUBLISHED_FIVE_CARD = {  # third check: the five-card counts every poker text publishes
    "royal-flush": 4,
    "straight-flush": 36,
    "four-of-a-kind": 624,
    "full-house": 3_744,
    "flush": 5_108,
    "straight": 10_200,
    "three-of-a-kind": 54_912,
    "two-pair": 123_552,
    "pair": 1_098_240,
    "high-card": 1_302_540,
}


def test_five_card_enumeration_matches_closed_form_and_published() -> None:
    walked = five_card.class_counts()
    closed = five_card.closed_form_counts()
    assert walked == closed
    assert sum(walked.values()) == comb(52, 5) == five_card.TOTAL
    assert walked == PUBLISHED_FIVE_CARD


def test_five_card_class_rules_agree_with_brute_force() -> None:
    """The walk's rules, hand by hand, against the plain five-card evaluator."""
    rng = random.Random(20261122)
    samples = [tuple(rng.sample(range(52), 5)) for _ in range(3000)]
    samples += [
        (ACE * 4, 0, 4, 8, 12),  # A-2-3-4-5 of spades: wheel straight flush
        (ACE * 4 + 1, 45, 41, 37, 33),  # royal of hearts
        (ACE * 4, 1, 6, 11, 12),  # wheel, mixed suits
        (ACE * 4, 44, 40, 36, 1),  # A-K-Q-J spades, 2 hearts: no straight
        (0, 1, 2, 20, 21),  # full house
    ]
    for cards in samples:
        assert holdem.classify_best_five(cards) == _brute_best(cards), cards


def test_five_card_other_player_by_conditioning() -> None:
    conditional = five_card.other_player_given_hole_cards()
    counts = five_card.closed_form_counts()
    assert conditional[holdem.ROYAL] == Fraction(counts["royal-flush"], five_card.TOTAL)
    assert conditional[holdem.STRAIGHT_FLUSH] == Fraction(counts["straight-flush"], five_card.TOTAL)


def test_best_five_walk_refuses_card_counts_it_cannot_count() -> None:
    with pytest.raises(ValueError, match="5 to 9 cards"):
        holdem.best_five_counts(10)


def test_royal_split_two_ways() -> None:
    closed = holdem.royal_split_closed_form()
    positional = holdem.royal_split_by_position()
    assert closed == positional
    assert closed[holdem.FIRST_5] == Fraction(4, comb(52, 5))
    assert closed[holdem.FIRST_5] == Fraction(five_card.class_counts()["royal-flush"], comb(52, 5))
    assert closed[holdem.COMMUNITY] == Fraction(4, comb(52, 5))
    assert sum(closed.values()) == Fraction(4_324, comb(52, 7))


def test_other_player_royal_and_straight_flush_by_conditioning(
    class_counts: dict[str, int],
) -> None:
    conditional = holdem.other_player_given_hole_cards()
    assert conditional[holdem.ROYAL] == Fraction(class_counts["royal-flush"], holdem.TOTAL)
    assert conditional[holdem.STRAIGHT_FLUSH] == Fraction(
        class_counts["straight-flush"], holdem.TOTAL
    )


@pytest.mark.parametrize("cls", ["akq-spades", "akq-suited", "straight-flush"])
def test_three_card_other_player_by_conditioning(cls: str) -> None:
    assert three_card.other_player_given_hand(cls) == Fraction(
        three_card.closed_form_counts()[cls], three_card.TOTAL
    )
