"""Three Card Poker progressive hands, counted two independent ways.

``enumerate_counts`` deals all C(52,3) = 22,100 hands and classifies each from its cards;
``closed_form_counts`` counts the same classes with combinatorial formulas. Tests require
the two to agree class by class.

Classes (disjoint, best first): A-K-Q of spades; A-K-Q of one of the other three suits;
other straight flushes; three of a kind; straights that are not flushes (A-2-3 and A-K-Q
count as straights); flushes that are not straights. A-K-Q of spades is also a straight
flush and a straight: its chain lets a paytable without an ``akq-spades`` row pay it as a
straight flush, but every shipped paytable pays it as ``akq-spades`` only.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from itertools import combinations
from math import comb

from progressived.config.paytables import Hand
from progressived.par.cards import ACE, DECK, RANKS, SPADES, SUITS, rank, suit
from progressived.par.outcomes import OutcomeClass

CARDS = 3
TOTAL = comb(DECK, CARDS)  # 22,100

AKQ_SPADES = "akq-spades"
AKQ_SUITED = "akq-suited"
STRAIGHT_FLUSH = "straight-flush"
THREE_OF_A_KIND = "three-of-a-kind"
STRAIGHT = "straight"
FLUSH = "flush"
CLASS_IDS = (AKQ_SPADES, AKQ_SUITED, STRAIGHT_FLUSH, THREE_OF_A_KIND, STRAIGHT, FLUSH)

_DESCRIPTIONS = {
    AKQ_SPADES: "A-K-Q of spades",
    AKQ_SUITED: "A-K-Q of diamonds, hearts or clubs",
    STRAIGHT_FLUSH: "straight flush other than A-K-Q suited",
    THREE_OF_A_KIND: "three of a kind",
    STRAIGHT: "straight that is not a flush",
    FLUSH: "flush that is not a straight",
}
_CHAINS: dict[str, tuple[Hand, ...]] = {
    AKQ_SPADES: (Hand.AKQ_SPADES, Hand.STRAIGHT_FLUSH, Hand.STRAIGHT, Hand.FLUSH),
    AKQ_SUITED: (Hand.AKQ_SUITED, Hand.STRAIGHT_FLUSH, Hand.STRAIGHT, Hand.FLUSH),
    STRAIGHT_FLUSH: (Hand.STRAIGHT_FLUSH, Hand.STRAIGHT, Hand.FLUSH),
    THREE_OF_A_KIND: (Hand.THREE_OF_A_KIND,),
    STRAIGHT: (Hand.STRAIGHT,),
    FLUSH: (Hand.FLUSH,),
}


def _is_three_card_straight(ranks: list[int]) -> bool:
    low, mid, high = sorted(ranks)
    if low + 1 == mid and mid + 1 == high:
        return True
    return (low, mid, high) == (0, 1, ACE)  # A-2-3


def classify(hand: tuple[int, ...]) -> str | None:
    """The class of one three-card hand, from its cards (None: a pair or less)."""
    ranks = [rank(c) for c in hand]
    suits = {suit(c) for c in hand}
    flush = len(suits) == 1
    straight = len(set(ranks)) == 3 and _is_three_card_straight(ranks)
    if flush and sorted(ranks) == [ACE - 2, ACE - 1, ACE]:
        return AKQ_SPADES if suits == {SPADES} else AKQ_SUITED
    if flush and straight:
        return STRAIGHT_FLUSH
    if len(set(ranks)) == 1:
        return THREE_OF_A_KIND
    if straight:
        return STRAIGHT
    if flush:
        return FLUSH
    return None


def enumerate_counts() -> dict[str, int]:
    """Deal every one of the 22,100 hands and count each class."""
    counts: Counter[str] = Counter()
    for hand in combinations(range(DECK), CARDS):
        cls = classify(hand)
        if cls is not None:
            counts[cls] += 1
    return {cls: counts[cls] for cls in CLASS_IDS}


def closed_form_counts() -> dict[str, int]:
    """The same counts from formulas.

    Three-card rank runs: A-2-3 up to Q-K-A, 12 of them. A straight flush is a run in one
    suit (12 x 4 = 48), of which the 4 A-K-Q are their own classes; a straight is a run
    in any suits but not all one suit (4^3 - 4 each); a flush is three ranks of one suit
    that are not a run (C(13,3) - 12 per suit); three of a kind is a rank and three of its
    four suits.
    """
    runs = RANKS - 1
    return {
        AKQ_SPADES: 1,
        AKQ_SUITED: SUITS - 1,
        STRAIGHT_FLUSH: runs * SUITS - SUITS,
        THREE_OF_A_KIND: RANKS * comb(SUITS, 3),
        STRAIGHT: runs * (SUITS**3 - SUITS),
        FLUSH: SUITS * (comb(RANKS, 3) - runs),
    }


def outcome_classes() -> tuple[OutcomeClass, ...]:
    """The classes with their probabilities per round (from the full enumeration)."""
    counts = enumerate_counts()
    return tuple(
        OutcomeClass(cls, _DESCRIPTIONS[cls], _CHAINS[cls], Fraction(counts[cls], TOTAL))
        for cls in CLASS_IDS
    )


def hands_of_class(cls: str) -> list[frozenset[int]]:
    """Every hand of one class (used to check envy by conditioning on the bettor's hand)."""
    return [frozenset(hand) for hand in combinations(range(DECK), CARDS) if classify(hand) == cls]


def other_player_given_hand(cls: str) -> Fraction:
    """P(another player's hand is of class ``cls``), by conditioning on the bettor's hand.

    For each of the 22,100 hands the bettor can hold, count the hands of the class that the
    49 cards left can deal the other player, and average. Equal to the unconditional
    probability by exchangeability; the tests check it.
    """
    targets = hands_of_class(cls)
    left = comb(DECK - CARDS, CARDS)
    favourable = 0
    for hand in combinations(range(DECK), CARDS):
        held = set(hand)
        favourable += sum(1 for t in targets if not t & held)
    return Fraction(favourable, TOTAL * left)
