"""The 52-card deck and the rank-set facts both counting methods share.

A card is an ``int`` 0..51: ``rank = card // 4`` (0 = deuce ... 12 = ace) and
``suit = card % 4`` (0 = spades). Rank sets are bit masks over the 13 ranks, so "does this
set of ranks hold five in a row" is a handful of mask tests. The ace plays high (T-J-Q-K-A)
and low (A-2-3-4-5) in five-card straights.
"""

from __future__ import annotations

from math import comb

RANKS = 13
SUITS = 4
DECK = RANKS * SUITS
ACE = 12
SPADES = 0

#: The ten five-card straights as rank masks, lowest (A-2-3-4-5) first.
STRAIGHT_MASKS: tuple[int, ...] = (
    0b1_0000_0000_1111,
    *(0b11111 << low for low in range(RANKS - 4)),
)
#: Ten through ace.
ROYAL_MASK = 0b11111 << (ACE - 4)


def rank(card: int) -> int:
    return card // SUITS


def suit(card: int) -> int:
    return card % SUITS


def card(rank_: int, suit_: int) -> int:
    return rank_ * SUITS + suit_


def rank_mask(ranks: list[int] | tuple[int, ...] | set[int] | frozenset[int]) -> int:
    mask = 0
    for r in ranks:
        mask |= 1 << r
    return mask


def has_straight(mask: int) -> bool:
    """True when the rank mask holds five ranks in a row (ace high or low)."""
    return any(mask & s == s for s in STRAIGHT_MASKS)


def popcount(mask: int) -> int:
    return bin(mask).count("1")


def hands(cards: int, deck: int = DECK) -> int:
    """How many unordered hands of ``cards`` cards a ``deck``-card deck deals."""
    return comb(deck, cards)
