"""Hold'em progressive hands on the first five cards: the two hole cards and the flop.

Paytables with ``cards = "first-five"`` (pmg-01/02) pay the hand the player's two hole
cards and the three flop cards make; the turn and river never count. Every ordered deal is
equally likely, so those five cards are a uniform 5-subset of the deck:
C(52,5) = 2,598,960 hands, each a plain five-card poker hand.

``closed_form_counts`` counts every category with the textbook formulas over rank patterns
and suits. ``class_counts`` is the independent exact enumeration: the rank-multiset walk of
:func:`progressived.par.holdem.best_five_counts`, run on five cards. A card-by-card loop
over 2.6 million hands would take minutes in Python; the walk visits 6,175 rank multisets.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations
from math import comb

from progressived.config.paytables import Hand
from progressived.par.cards import DECK, RANKS, ROYAL_MASK, STRAIGHT_MASKS, SUITS
from progressived.par.holdem import (
    FLUSH,
    FOUR,
    FULL_HOUSE,
    HIGH,
    PAIR,
    PAYING,
    PLAIN_CHAINS,
    ROYAL,
    STRAIGHT,
    STRAIGHT_FLUSH,
    THREE,
    TWO_PAIR,
    best_five_counts,
    rank_sets_with_straight,
)
from progressived.par.outcomes import OutcomeClass

CARDS = 5
TOTAL = comb(DECK, CARDS)  # 2,598,960


def closed_form_counts() -> dict[str, int]:
    """Five-card counts of every category, by formulas (see docs/par.md).

    A run is one of the ten rank sets that make a straight (A-2-3-4-5 up to 10-J-Q-K-A);
    "not all one suit" is 4^5 - 4 suitings of five distinct ranks.
    """
    runs = rank_sets_with_straight(CARDS)  # 10
    no_run = comb(RANKS, 5) - runs
    mixed_suits = SUITS**5 - SUITS
    return {
        ROYAL: SUITS,
        STRAIGHT_FLUSH: (len(STRAIGHT_MASKS) - 1) * SUITS,
        FOUR: RANKS * (DECK - SUITS),
        FULL_HOUSE: RANKS * comb(SUITS, 3) * (RANKS - 1) * comb(SUITS, 2),
        FLUSH: SUITS * no_run,
        STRAIGHT: runs * mixed_suits,
        THREE: RANKS * comb(SUITS, 3) * comb(RANKS - 1, 2) * SUITS**2,
        TWO_PAIR: comb(RANKS, 2) * comb(SUITS, 2) ** 2 * (RANKS - 2) * SUITS,
        PAIR: RANKS * comb(SUITS, 2) * comb(RANKS - 1, 3) * SUITS**3,
        HIGH: no_run * mixed_suits,
    }


def class_counts() -> dict[str, int]:
    """The same counts by the rank-multiset walk over five cards."""
    return best_five_counts(CARDS)


_DESCRIPTIONS = {
    ROYAL: "royal flush in the two hole cards and the flop",
    STRAIGHT_FLUSH: "straight flush other than a royal in the two hole cards and the flop",
    FOUR: "four of a kind in the two hole cards and the flop",
    FULL_HOUSE: "full house in the two hole cards and the flop",
    FLUSH: "flush in the two hole cards and the flop",
    STRAIGHT: "straight in the two hole cards and the flop",
    THREE: "three of a kind in the two hole cards and the flop",
}
_CHAINS: dict[str, tuple[Hand, ...]] = {
    ROYAL: (Hand.ROYAL_FLUSH, Hand.STRAIGHT_FLUSH),
    **PLAIN_CHAINS,
}


def outcome_classes() -> tuple[OutcomeClass, ...]:
    """The classes with their probabilities per round (closed-form counts)."""
    counts = closed_form_counts()
    return tuple(
        OutcomeClass(cat, _DESCRIPTIONS[cat], _CHAINS[cat], Fraction(counts[cat], TOTAL))
        for cat in PAYING
    )


def other_player_given_hole_cards() -> dict[str, Fraction]:
    """P(another player's first five are a royal / a lower straight flush), by conditioning.

    For each of the C(52,2) hole-card pairs the bettor can hold, the other player's first
    five cards (their two hole cards and the shared flop) are a uniform 5-subset of the 50
    cards left; count the royals and straight flushes those 50 still hold and average.
    Independent of the counts above; equal to them by exchangeability (the tests check it).
    """
    left = DECK - 2
    subsets = comb(left, CARDS)
    royal_total = 0
    flush_total = 0
    for hole in combinations(range(DECK), 2):
        held = set(hole)
        for s in range(SUITS):
            for mask in STRAIGHT_MASKS:
                cards = {r * SUITS + s for r in range(RANKS) if mask >> r & 1}
                if cards & held:
                    continue
                if mask == ROYAL_MASK:
                    royal_total += 1
                else:
                    flush_total += 1
    pairs = comb(DECK, 2)
    return {
        ROYAL: Fraction(royal_total, pairs * subsets),
        STRAIGHT_FLUSH: Fraction(flush_total, pairs * subsets),
    }
