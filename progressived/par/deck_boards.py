"""The boards the one-deck search visits, and the hands each lets a seat hold.

A deal is a *board* (nothing for Three Card Poker, the flop for the first-five reading,
flop, turn and river for best of seven) plus each keyed seat's own cards, all distinct.
Given the board, a seat's class depends only on its own cards. Boards are described up to
the symmetries that cannot change any class:

* Three Card Poker has no board: one description over the 52 cards.
* Hold'em: a suit holding at most two board cards can never reach five cards of that suit
  in one player's hand (two hole cards), so its cards act by rank alone and the cards of
  one rank in such suits are interchangeable (one card *type* with a capacity). A board is
  therefore described by how many cards of each rank it holds and, when one suit holds
  three or more board cards (at most one can), which ranks carry that suit. Every hand is
  classified from concrete representative cards by the PAR sheet's evaluator, so no hand
  rule is restated; the tests check the description against boards dealt card by card.
* For best of seven the flop matters only to tell a royal in the first five cards (hole
  cards and flop) from one needing the turn or river: both placements of the flop are
  described when the board holds exactly three cards of a royal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from progressived.config.paytables import Cards
from progressived.par import holdem, three_card
from progressived.par.cards import RANKS, ROYAL_MASK, SUITS, card, has_straight, popcount

#: The classes the table covers for each reading: every class a shipped paytable can pay
#: (best of seven: the hands of UTHP-01/02; lower seven-card hands are not tabulated).
UNIVERSE: dict[Cards, tuple[str, ...]] = {
    Cards.THREE_CARD: three_card.CLASS_IDS,
    Cards.FIRST_FIVE: holdem.PAYING,
    Cards.BEST_OF_SEVEN: (
        holdem.FIRST_5,
        holdem.COMMUNITY,
        holdem.OTHER_ROYAL,
        holdem.STRAIGHT_FLUSH,
        holdem.FOUR,
        holdem.FULL_HOUSE,
    ),
}


@dataclass
class Board:
    """One board up to symmetry: card types with capacities, and per class its card sets.

    ``items[cls]`` lists tuples of type indices (a type may repeat: two cards of one
    interchangeable type). ``example`` is a concrete board and ``cards[t]`` the concrete
    cards of type ``t``, to print a witness deal.
    """

    caps: tuple[int, ...]
    items: dict[str, list[tuple[int, ...]]]
    example: tuple[int, ...]
    cards: tuple[tuple[int, ...], ...]
    present: frozenset[str] = field(init=False)  # the classes some seat can hold here
    uses: dict[str, list[tuple[tuple[int, int], ...]]] = field(init=False)  # (type, cards)
    types: dict[str, frozenset[int]] = field(init=False)  # the types a class's items use

    def __post_init__(self) -> None:
        self.present = frozenset(cls for cls, items in self.items.items() if items)
        self.uses = {
            cls: [tuple(Counter(item).items()) for item in items]
            for cls, items in self.items.items()
        }
        self.types = {
            cls: frozenset(t for item in items for t in item) for cls, items in self.items.items()
        }


def classify_seven(hole: Sequence[int], flop: Sequence[int], rest: Sequence[int]) -> str:
    """A player's class on best of seven, with a royal split by where its cards sit."""
    cat = holdem.classify_best_five((*hole, *flop, *rest))
    if cat != holdem.ROYAL:
        return cat
    if _is_royal((*hole, *flop)):
        return holdem.FIRST_5
    if _is_royal((*flop, *rest)):
        return holdem.COMMUNITY
    return holdem.OTHER_ROYAL


def classify_five(hole: Sequence[int], flop: Sequence[int]) -> str:
    return holdem.classify_best_five((*hole, *flop))


def _is_royal(cards: Sequence[int]) -> bool:
    suits = {c % SUITS for c in cards}
    mask = 0
    for c in cards:
        mask |= 1 << (c // SUITS)
    return len(cards) == 5 and len(suits) == 1 and mask == ROYAL_MASK


# ------------------------------------------------------------------ boards


def three_card_board(deck: Sequence[int] = tuple(range(RANKS * SUITS))) -> Board:
    """Three Card Poker: every card its own type; items are the three-card hands."""
    index = {c: i for i, c in enumerate(deck)}
    items: dict[str, list[tuple[int, ...]]] = {cls: [] for cls in three_card.CLASS_IDS}
    for hand in combinations(deck, 3):
        cls = three_card.classify(hand)
        if cls is not None:
            items[cls].append(tuple(index[c] for c in hand))
    return Board((1,) * len(deck), items, (), tuple((c,) for c in deck))


def _rank_vectors(cards: int, ranks: int) -> Iterator[tuple[int, ...]]:
    if ranks == 0:
        if cards == 0:
            yield ()
        return
    for here in range(min(SUITS, cards) + 1):
        for rest in _rank_vectors(cards - here, ranks - 1):
            yield (here, *rest)


def _suitings(vector: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """Concrete boards for a rank vector: one with no suit on three cards (if any), and one
    per set of three or more ranks carrying suit 0 (spades) with no other suit on three."""
    present = [r for r, n in enumerate(vector) if n]
    # No suit on three or more: deal the ranks' suits round robin from the least used.
    used = [0] * SUITS
    plain: list[int] = []
    for r in sorted(present, key=lambda r: -vector[r]):
        suits = sorted(range(SUITS), key=lambda s: (used[s], s))[: vector[r]]
        for s in suits:
            used[s] += 1
            plain.append(card(r, s))
    if max(used) <= 2:
        yield tuple(sorted(plain))
    for size in range(3, len(present) + 1):
        for chosen in combinations(present, size):
            cards: list[int] = []
            counts = [0] * SUITS
            ok = True
            for r in present:
                need = vector[r]
                suits = [0] if r in chosen else []
                others = list(range(1, SUITS))
                others.sort(key=lambda s: (counts[s], s))
                suits += others[: need - len(suits)]
                if len(suits) < need:
                    ok = False
                    break
                for s in suits:
                    counts[s] += 1
                    cards.append(card(r, s))
            if ok and counts[0] >= 3 and max(counts[1:]) <= 2:
                yield tuple(sorted(cards))


def _types(board: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """The interchangeable groups of the cards left: per rank, the flush suit's card alone
    and the other suits' cards together (every suit is 'other' when none holds three)."""
    on_board = set(board)
    by_suit = [sum(1 for c in board if c % SUITS == s) for s in range(SUITS)]
    flush_suits = {s for s in range(SUITS) if by_suit[s] >= 3}
    groups: list[tuple[int, ...]] = []
    for r in range(RANKS):
        left = [card(r, s) for s in range(SUITS) if card(r, s) not in on_board]
        special = [c for c in left if c % SUITS in flush_suits]
        others = tuple(c for c in left if c % SUITS not in flush_suits)
        groups.extend((c,) for c in special)
        if others:
            groups.append(others)
    return tuple(groups)


_FULL_HOUSE_OR_BETTER = frozenset(
    {
        holdem.FIRST_5,
        holdem.COMMUNITY,
        holdem.OTHER_ROYAL,
        holdem.ROYAL,
        holdem.STRAIGHT_FLUSH,
        holdem.FOUR,
        holdem.FULL_HOUSE,
    }
)


class _Shortcut:
    """A shortcut, not a rule: four of a kind needs four cards of a rank, a full house three
    of one and two of another, a straight flush five cards of a suit in a row. When the
    table covers only such hands, a hole pair that brings none is not classified (the
    classifier decides the rest). Counted once per board, then per pair."""

    def __init__(self, board: Sequence[int]) -> None:
        self.ranks = [0] * RANKS
        self.suits = [0] * SUITS
        for c in board:
            self.ranks[c // SUITS] += 1
            self.suits[c % SUITS] |= 1 << (c // SUITS)
        self.flushy = [s for s in range(SUITS) if popcount(self.suits[s]) >= 3]
        self.full: dict[tuple[int, int], bool] = {}

    def may_reach(self, a: int, b: int) -> bool:
        key = (a // SUITS, b // SUITS)
        full = self.full.get(key)
        if full is None:
            ranks = self.ranks.copy()
            ranks[key[0]] += 1
            ranks[key[1]] += 1
            first, second = sorted(ranks, reverse=True)[:2]
            full = self.full[key] = first >= 4 or (first >= 3 and second >= 2)
        if full:
            return True
        for s in self.flushy:  # a suit with three board cards: five with both hole cards
            mask = self.suits[s]
            for c in (a, b):
                if c % SUITS == s:
                    mask |= 1 << (c // SUITS)
            if popcount(mask) >= 5 and has_straight(mask):
                return True
        return False


def _holdem_board(
    reading: Cards, flop: tuple[int, ...], rest: tuple[int, ...], universe: frozenset[str]
) -> Board:
    groups = _types((*flop, *rest))
    shortcut = _Shortcut((*flop, *rest)) if universe <= _FULL_HOUSE_OR_BETTER else None
    items: dict[str, list[tuple[int, ...]]] = {cls: [] for cls in universe}
    pairs: list[tuple[tuple[int, ...], tuple[int, int]]] = [
        ((groups[i][0], groups[j][0]), (i, j)) for i, j in combinations(range(len(groups)), 2)
    ]
    pairs += [(group[:2], (i, i)) for i, group in enumerate(groups) if len(group) >= 2]
    for (a, b), types in pairs:
        if shortcut is not None and not shortcut.may_reach(a, b):
            continue
        if reading is Cards.FIRST_FIVE:
            cls = classify_five((a, b), flop)
        else:
            cls = classify_seven((a, b), flop, rest)
        if cls in universe:
            items[cls].append(types)
    caps = tuple(len(g) for g in groups)
    return Board(caps, items, (*flop, *rest), groups)


def holdem_boards(reading: Cards) -> Iterator[Board]:
    """Every hold'em board up to the symmetries above."""
    size = 3 if reading is Cards.FIRST_FIVE else 5
    universe = frozenset(UNIVERSE[reading])
    for vector in _rank_vectors(size, RANKS):
        for board in _suitings(vector):
            if reading is Cards.FIRST_FIVE:
                yield _holdem_board(reading, board, (), universe)
                continue
            for flop, rest in _placements(board):
                yield _holdem_board(reading, flop, rest, universe)


def _placements(board: tuple[int, ...]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Flop/turn-river splits that can differ: with exactly three cards of one royal on the
    board, those three as the flop and (if possible) a flop without one of them."""
    royal_cards = [c for c in board if 1 << (c // SUITS) & ROYAL_MASK]
    for s in range(SUITS):
        mine = tuple(c for c in royal_cards if c % SUITS == s)
        if len(mine) == 3:
            rest = tuple(c for c in board if c not in mine)
            other_flop = (mine[0], mine[1], rest[0])
            other_rest = tuple(c for c in board if c not in other_flop)
            return [(mine, rest), (other_flop, other_rest)]
    return [(board[:3], board[3:])]


def boards(reading: Cards) -> list[Board]:
    if reading is Cards.THREE_CARD:
        return [three_card_board()]
    return list(holdem_boards(reading))
