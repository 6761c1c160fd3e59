"""The shipped one-deck table against the search that made it, re-run in full.

``progressived.engine.deck_table`` is generated: for each card reading, every set of up to
``MAX_KEYED`` keyed hands one deck cannot deal. Here the search runs again over every board
(the best-of-seven reading takes minutes, hence the reliability suite; the default suite
checks the search against brute force on concrete boards, tests/test_deck_guard.py) and must
find exactly the shipped table, each possible set with a deal of concrete cards that gives it.
"""

from __future__ import annotations

from collections import Counter
from functools import cache

import pytest

from progressived.config.paytables import Cards
from progressived.engine.deck_table import IMPOSSIBLE, MAX_KEYED, UNIVERSE
from progressived.par import deck, deck_boards, three_card
from progressived.par.cards import DECK, SUITS
from tests.test_deck_guard import FIVE, SEVEN, sample_boards

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(1800)]


@cache
def all_boards(reading: Cards) -> list[deck_boards.Board]:
    """The search's boards, built once for both tests (seven: a minute or two)."""
    return deck_boards.boards(reading)


@pytest.mark.parametrize("reading", [Cards.THREE_CARD, FIVE, SEVEN])
def test_the_shipped_table_is_what_the_search_finds(reading: Cards) -> None:
    result = deck.minimal_impossible(reading, MAX_KEYED, all_boards(reading))
    assert UNIVERSE[reading.value] == result.classes
    found = tuple(
        tuple((c, n) for c, n in zip(result.classes, v, strict=True) if n)
        for v in result.impossible
    )
    assert IMPOSSIBLE[reading.value] == found
    # every possible set found comes with a deal of concrete cards that really gives it
    for vector, (index, packing) in result.witness.items():
        board, seats = deck.deal(result.boards[index], packing)
        assert Counter(cls for cls, _ in seats) == Counter(
            {c: n for c, n in zip(result.classes, vector, strict=True) if n}
        )
        used = list(board) + [c for _, own in seats for c in own]
        assert len(used) == len(set(used)) and all(0 <= c < DECK for c in used)
        for cls, own in seats:
            assert classify(reading, board, own) == cls, (board, own)


def classify(reading: Cards, board: tuple[int, ...], own: tuple[int, ...]) -> str | None:
    if reading is Cards.THREE_CARD:
        return three_card.classify(own)
    if reading is FIVE:
        return deck_boards.classify_five(own, board)
    return deck_boards.classify_seven(own, board[:3], board[3:])


def signature(reading: Cards, flop: tuple[int, ...], rest: tuple[int, ...]) -> tuple[object, ...]:
    """What the search treats as one board: rank counts, the ranks of a suit holding three
    or more, and (best of seven) whether the flop is three cards of a royal."""
    cards = (*flop, *rest)
    counts = tuple(sum(1 for c in cards if c // SUITS == r) for r in range(13))
    suits = Counter(c % SUITS for c in cards)
    flush = [s for s, n in suits.items() if n >= 3]
    ranks = frozenset(c // SUITS for c in cards if flush and c % SUITS == flush[0])
    royal = [
        s for s in range(SUITS) if sum(1 for c in cards if c % SUITS == s and c // SUITS >= 8) == 3
    ]
    royal_flop = bool(royal) and all(c % SUITS == royal[0] and c // SUITS >= 8 for c in flop)
    return counts, ranks, reading is SEVEN and royal_flop


@pytest.mark.parametrize("reading", [FIVE, SEVEN])
def test_the_search_visits_every_board(reading: Cards) -> None:
    seen = {signature(reading, b.example[:3], b.example[3:]) for b in all_boards(reading)}
    size = 3 if reading is FIVE else 5
    for cards in sample_boards(size, 3000, 9):
        for flop in (cards[:3], cards[2:5]) if size == 5 else (cards,):
            rest = tuple(c for c in cards if c not in flop)
            assert signature(reading, flop, rest) in seen, cards
