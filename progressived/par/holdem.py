"""Hold'em progressive hands: the best five of a player's seven cards, counted two ways.

A player's seven cards are two hole cards, the three-card flop, the turn and the river.
Every ordered deal is equally likely, so the unordered seven are a uniform 7-subset of the
deck (C(52,7) = 133,784,560) and the *positions* of any five of them among the seven are
uniform too.

``closed_form_counts`` counts each category with formulas over rank patterns and suit
assignments. ``class_counts`` is an independent exact enumeration: it walks every multiset
of seven ranks (how many cards of each rank), weighs it by its suit assignments and, for the
assignments that put five or more cards in one suit, enumerates which ranks carry that suit.
It visits every 7-card set once, in classes, in a few seconds instead of the hours a
card-by-card loop over 133 million hands would take in Python. The walk
(``best_five_counts``) takes the number of cards, so the first-five reading
(:mod:`progressived.par.five_card`) counts with it too.

Royals are then split by where their five cards sit (``royal_split``): in the first five
cards (hole cards and flop), in the five community cards, or elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from itertools import combinations
from math import comb, prod

from progressived.config.paytables import Hand
from progressived.par.cards import (
    DECK,
    RANKS,
    ROYAL_MASK,
    STRAIGHT_MASKS,
    SUITS,
    has_straight,
    rank_mask,
)
from progressived.par.outcomes import OutcomeClass

CARDS = 7
TOTAL = comb(DECK, CARDS)  # 133,784,560

ROYAL = "royal-flush"
STRAIGHT_FLUSH = "straight-flush"
FOUR = "four-of-a-kind"
FULL_HOUSE = "full-house"
FLUSH = "flush"
STRAIGHT = "straight"
THREE = "three-of-a-kind"
TWO_PAIR = "two-pair"
PAIR = "pair"
HIGH = "high-card"
#: Best first.
CATEGORIES = (ROYAL, STRAIGHT_FLUSH, FOUR, FULL_HOUSE, FLUSH, STRAIGHT, THREE, TWO_PAIR, PAIR, HIGH)
PAYING = CATEGORIES[:7]
_ORDER = {cat: index for index, cat in enumerate(CATEGORIES)}


def _best(a: str, b: str) -> str:
    return a if _ORDER[a] <= _ORDER[b] else b


# ---------------------------------------------------------------- closed form


def rank_sets_with_straight(size: int) -> int:
    """How many sets of ``size`` distinct ranks hold five in a row (10, 71, 217 for 5-7)."""
    return sum(1 for ranks in combinations(range(RANKS), size) if has_straight(rank_mask(ranks)))


def _no_flush_suitings(multiplicities: tuple[int, ...]) -> int:
    """Suit assignments of a rank pattern with no suit on five or more cards.

    ``multiplicities`` are the cards of each distinct rank (e.g. (2,1,1,1,1,1)). Written out
    by hand for the patterns a straight or a lone three of a kind can have.
    """
    ones = multiplicities.count(1)
    if multiplicities == (1,) * 7:
        flushes = SUITS * (comb(7, 5) * 3**2 + comb(7, 6) * 3 + 1)
        return SUITS**7 - flushes
    if sorted(multiplicities) == [1, 1, 1, 1, 1, 2]:
        # suit s on five ranks: all five singles (pair any: C(4,2)), or four singles and
        # the pair (which single misses s: 5 x 3; the pair holds s: 3)
        flushes = SUITS * (comb(4, 2) + ones * 3 * 3)
        return comb(4, 2) * prod([SUITS] * ones) - flushes
    if sorted(multiplicities) == [1, 1, 1, 1, 3]:
        flushes = SUITS * comb(3, 2)  # s on all five ranks: the trips hold s
        return comb(4, 3) * prod([SUITS] * ones) - flushes
    if sorted(multiplicities) == [1, 1, 1, 2, 2]:
        flushes = SUITS * 3 * 3  # both pairs hold s, the singles are s
        return comb(4, 2) ** 2 * prod([SUITS] * ones) - flushes
    raise ValueError(f"no formula for rank pattern {multiplicities}")


def closed_form_counts() -> dict[str, int]:
    """Seven-card counts of the paying categories, by formulas (see docs/par.md)."""
    other = DECK - 13  # cards off the flush suit
    r5, r6, r7 = (rank_sets_with_straight(n) for n in (5, 6, 7))
    no_straight = {5: comb(RANKS, 5) - r5, 6: comb(RANKS, 6) - r6, 7: comb(RANKS, 7) - r7}
    royal = SUITS * comb(DECK - 5, 2)
    # straight flushes below the royal: tops 5..K in each suit; the two other cards may be
    # anything but the card one above the top in the same suit (that makes a higher one)
    straight_flush = (len(STRAIGHT_MASKS) - 1) * SUITS * comb(DECK - 6, 2)
    four = RANKS * comb(DECK - 4, 3)
    full_house = (
        comb(RANKS, 2) * comb(4, 3) ** 2 * (DECK - 8)  # two trips and a single
        + RANKS * comb(4, 3) * comb(RANKS - 1, 2) * comb(4, 2) ** 2  # trips, two pairs
        + RANKS * comb(4, 3) * (RANKS - 1) * comb(4, 2) * comb(RANKS - 2, 2) * SUITS**2
    )
    # k cards of the flush suit on ranks without a straight, 7-k off suit (no quads or full
    # house fits beside five suited cards in seven)
    flush = SUITS * sum(no_straight[k] * comb(other, CARDS - k) for k in (5, 6, 7))
    straight = (
        r7 * _no_flush_suitings((1,) * 7)
        + r6 * 6 * _no_flush_suitings((2, 1, 1, 1, 1, 1))
        + r5 * (5 * _no_flush_suitings((3, 1, 1, 1, 1)) + 10 * _no_flush_suitings((2, 2, 1, 1, 1)))
    )
    three = no_straight[5] * 5 * _no_flush_suitings((3, 1, 1, 1, 1))
    return {
        ROYAL: royal,
        STRAIGHT_FLUSH: straight_flush,
        FOUR: four,
        FULL_HOUSE: full_house,
        FLUSH: flush,
        STRAIGHT: straight,
        THREE: three,
    }


# ---------------------------------------------------------------- class enumeration


def _rank_vectors(cards: int, ranks: int) -> Iterator[tuple[int, ...]]:
    """Every way to hold ``cards`` cards over ``ranks`` ranks, at most four per rank."""
    if ranks == 0:
        if cards == 0:
            yield ()
        return
    for here in range(min(SUITS, cards) + 1):
        for rest in _rank_vectors(cards - here, ranks - 1):
            yield (here, *rest)


def _rank_category(counts: tuple[int, ...], mask: int) -> str:
    if 4 in counts:
        return FOUR
    threes = counts.count(3)
    pairs = counts.count(2)
    if threes >= 2 or (threes == 1 and pairs >= 1):
        return FULL_HOUSE
    if has_straight(mask):
        return STRAIGHT
    if threes:
        return THREE
    if pairs >= 2:
        return TWO_PAIR
    if pairs == 1:
        return PAIR
    return HIGH


def _flush_category(mask: int) -> str:
    if mask & ROYAL_MASK == ROYAL_MASK:
        return ROYAL
    if has_straight(mask):
        return STRAIGHT_FLUSH
    return FLUSH


def best_five_counts(cards: int) -> dict[str, int]:
    """Count every category of the best five of ``cards`` cards (5 to 9), by rank multisets.

    For a rank multiset with ``c_r`` cards of rank ``r`` there are prod C(4, c_r) suit
    assignments. Fewer than ten cards hold at most one suit five or more times; the
    assignments where suit s sits on exactly the ranks F (|F| >= 5) number
    prod_{r in F} C(3, c_r - 1) x prod_{r not in F} C(3, c_r). Those are flushes
    (straight/royal by F); every other assignment is ranked by the multiset alone. The
    same walk serves seven cards (:func:`class_counts`) and the first five
    (:mod:`progressived.par.five_card`).
    """
    if not 5 <= cards <= 9:
        raise ValueError(f"the walk counts 5 to 9 cards, not {cards}")
    counts = dict.fromkeys(CATEGORIES, 0)
    for vector in _rank_vectors(cards, RANKS):
        present = [(r, c) for r, c in enumerate(vector) if c]
        mask = rank_mask([r for r, _ in present])
        multiplicities = tuple(c for _, c in present)
        assignments = prod(comb(SUITS, c) for c in multiplicities)
        rank_cat = _rank_category(multiplicities, mask)
        flushed = 0
        if len(present) >= 5:
            for size in range(5, len(present) + 1):
                for chosen in combinations(range(len(present)), size):
                    inside = set(chosen)
                    ways = prod(
                        comb(SUITS - 1, c - 1) if i in inside else comb(SUITS - 1, c)
                        for i, (_, c) in enumerate(present)
                    )
                    if not ways:
                        continue
                    flush_mask = rank_mask([present[i][0] for i in chosen])
                    cat = _best(_flush_category(flush_mask), rank_cat)
                    counts[cat] += SUITS * ways
                    flushed += SUITS * ways
        counts[rank_cat] += assignments - flushed
    return counts


def class_counts() -> dict[str, int]:
    """Count every seven-card category by enumerating rank multisets (:func:`best_five_counts`)."""
    return best_five_counts(CARDS)


def classify_best_five(cards: tuple[int, ...]) -> str:
    """The best-five category of five to nine cards by the rules :func:`best_five_counts` uses.

    Used by the tests to hold those rules against a brute-force evaluator of every five-card
    subset.
    """
    counts = [0] * RANKS
    by_suit = [0] * SUITS
    for c in cards:
        counts[c // SUITS] += 1
        by_suit[c % SUITS] |= 1 << (c // SUITS)
    present = tuple(c for c in counts if c)
    cat = _rank_category(present, rank_mask([r for r, c in enumerate(counts) if c]))
    for mask in by_suit:
        if bin(mask).count("1") >= 5:
            cat = _best(_flush_category(mask), cat)
    return cat


# ---------------------------------------------------------------- where a royal sits


FIRST_5 = "royal-first-5"
COMMUNITY = "royal-community"
OTHER_ROYAL = "royal-other"


def royal_split_closed_form() -> dict[str, Fraction]:
    """P(the first five cards are a royal), P(the board is), P(a royal elsewhere in seven).

    The first five cards (hole cards and flop) are a uniform 5-subset: 4 / C(52,5). So are
    the five community cards. The two events are disjoint (both would put the flop in two
    different royals of one suit). The rest of P(royal in seven) is the royal that needs
    a hole card and the turn or river.
    """
    first_five = Fraction(SUITS, comb(DECK, 5))
    community = Fraction(SUITS, comb(DECK, 5))
    any_royal = Fraction(closed_form_counts()[ROYAL], TOTAL)
    return {
        FIRST_5: first_five,
        COMMUNITY: community,
        OTHER_ROYAL: any_royal - first_five - community,
    }


def royal_split_by_position() -> dict[str, Fraction]:
    """The same split by enumerating the positions of the royal's five cards among seven.

    Given the seven cards hold a royal, which five of the seven deal positions its cards
    occupy is uniform over the C(7,5) = 21 choices (every ordering of the seven is equally
    likely). Positions 0-1 are hole cards, 2-4 the flop, 5-6 turn and river.
    """
    any_royal = Fraction(class_counts()[ROYAL], TOTAL)
    hole = {0, 1}
    tally = {FIRST_5: 0, COMMUNITY: 0, OTHER_ROYAL: 0}
    placements = list(combinations(range(CARDS), 5))
    for positions in placements:
        where = set(positions)
        if where == {0, 1, 2, 3, 4}:
            tally[FIRST_5] += 1
        elif not where & hole:
            tally[COMMUNITY] += 1
        else:
            tally[OTHER_ROYAL] += 1
    return {key: any_royal * Fraction(n, len(placements)) for key, n in tally.items()}


_DESCRIPTIONS = {
    FIRST_5: "royal flush in the two hole cards and the flop",
    COMMUNITY: "royal flush in the five community cards",
    OTHER_ROYAL: "royal flush that needs a hole card and the turn or river",
    STRAIGHT_FLUSH: "straight flush other than a royal",
    FOUR: "four of a kind",
    FULL_HOUSE: "full house",
    FLUSH: "flush",
    STRAIGHT: "straight",
    THREE: "three of a kind",
}
# Below the royals, a category is paid as its own hand (shared with the five-card reading).
PLAIN_CHAINS: dict[str, tuple[Hand, ...]] = {
    STRAIGHT_FLUSH: (Hand.STRAIGHT_FLUSH,),
    FOUR: (Hand.FOUR_OF_A_KIND,),
    FULL_HOUSE: (Hand.FULL_HOUSE,),
    FLUSH: (Hand.FLUSH,),
    STRAIGHT: (Hand.STRAIGHT,),
    THREE: (Hand.THREE_OF_A_KIND,),
}
_CHAINS: dict[str, tuple[Hand, ...]] = {
    FIRST_5: (Hand.ROYAL_FLUSH_FIRST_5, Hand.ROYAL_FLUSH, Hand.STRAIGHT_FLUSH),
    COMMUNITY: (Hand.COMMUNITY_ROYAL, Hand.ROYAL_FLUSH, Hand.STRAIGHT_FLUSH),
    OTHER_ROYAL: (Hand.ROYAL_FLUSH, Hand.STRAIGHT_FLUSH),
    **PLAIN_CHAINS,
}


def outcome_classes() -> tuple[OutcomeClass, ...]:
    """The classes with their probabilities per round (closed-form counts)."""
    counts = closed_form_counts()
    split = royal_split_closed_form()
    probs: dict[str, Fraction] = dict(split)
    for cat in PAYING[1:]:
        probs[cat] = Fraction(counts[cat], TOTAL)
    return tuple(OutcomeClass(cls, _DESCRIPTIONS[cls], _CHAINS[cls], probs[cls]) for cls in _CHAINS)


# ---------------------------------------------------------------- another player's hand


def other_player_given_hole_cards() -> dict[str, Fraction]:
    """P(another player's best hand is a royal / a lower straight flush), by conditioning.

    For each of the C(52,2) hole-card pairs the bettor can hold, the other player's seven
    cards (their two hole cards and the shared board) are a uniform 7-subset of the 50
    cards left. Count the royals and straight flushes those 50 allow, then average over
    the bettor's hole cards. Independent of the counts above; equal to them by
    exchangeability, which is what the tests check.
    """
    left = DECK - 2
    subsets = comb(left, CARDS)
    royal_total = 0
    flush_total = 0
    for hole in combinations(range(DECK), 2):
        held = set(hole)
        for s in range(SUITS):
            for top in range(3, RANKS):  # 3 = the five-high straight's top rank
                mask = STRAIGHT_MASKS[top - 3]
                cards = {r * SUITS + s for r in range(RANKS) if mask >> r & 1}
                if cards & held:
                    continue
                if mask == ROYAL_MASK:
                    royal_total += comb(left - 5, 2)
                    continue
                above = (top + 1) * SUITS + s
                blocked = 1 if above not in held else 0
                flush_total += comb(left - 5 - blocked, 2)
    pairs = comb(DECK, 2)
    return {
        ROYAL: Fraction(royal_total, pairs * subsets),
        STRAIGHT_FLUSH: Fraction(flush_total, pairs * subsets),
    }
