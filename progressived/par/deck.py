"""Which keyed sets one deck can deal, by search over card assignments.

This computes the table the one-deck guard (:mod:`progressived.engine.deck`) reads: for
each reading, the minimal multisets of hand classes that no deal of one 52-card deck gives
to that many seats at once.

A deal is a *board* (nothing for Three Card Poker, the flop for the first-five reading,
flop, turn and river for best of seven) plus each keyed seat's own cards, all distinct.
Given the board, a seat's class depends only on its own cards, so the question for a
multiset {class: count} is a packing one: choose ``count`` disjoint card sets of each
class. :func:`packable` answers it by depth-first search over *card types* with
capacities (memoised on what is left).

Boards are searched up to the symmetries that cannot change any class:

* Three Card Poker has no board: one packing over the 52 cards.
* Hold'em: a suit holding at most two board cards can never reach five cards of that suit
  in one player's hand (two hole cards), so its cards act by rank alone and the cards of
  one rank in such suits are interchangeable. A board is therefore described by how many
  cards of each rank it holds and, when one suit holds three or more board cards (at most
  one can), which ranks carry that suit; a hole card is either that suit's card of a rank
  or one of the interchangeable others. Every hand is classified from concrete
  representative cards by the ordinary evaluator, so no hand rule is restated here; the
  tests check the description against boards dealt card by card.
* For best of seven the flop matters only to tell a royal in the first five cards
  (hole cards and flop) from one needing the turn or river: both placements of the flop
  are searched when the board holds exactly three cards of a royal.

:func:`minimal_impossible` walks multisets by size: a multiset all of whose one-smaller
subsets are possible is searched on every board; if no board packs it, it is a minimal
impossible set. Possible sets keep the board that dealt them, tried first for their
supersets.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from progressived.par import holdem, three_card
from progressived.par.cards import RANKS, ROYAL_MASK, SUITS, card
from progressived.paytable import Cards

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

    def __post_init__(self) -> None:
        self.present = frozenset(cls for cls, items in self.items.items() if items)


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


def _full_house_or_better_possible(cards: Sequence[int]) -> bool:
    """A shortcut, not a rule: a full house or four of a kind needs three cards of a rank,
    a straight flush five of a suit; cards with neither need no classifying."""
    ranks = [0] * RANKS
    suits = [0] * SUITS
    for c in cards:
        ranks[c // SUITS] += 1
        suits[c % SUITS] += 1
    return max(ranks) >= 3 or max(suits) >= 5


def _holdem_board(
    reading: Cards, flop: tuple[int, ...], rest: tuple[int, ...], universe: frozenset[str]
) -> Board:
    groups = _types((*flop, *rest))
    items: dict[str, list[tuple[int, ...]]] = {cls: [] for cls in universe}
    for i, j in combinations(range(len(groups)), 2):
        _add(items, reading, (groups[i][0], groups[j][0]), (i, j), flop, rest, universe)
    for i, group in enumerate(groups):
        if len(group) >= 2:
            _add(items, reading, group[:2], (i, i), flop, rest, universe)
    caps = tuple(len(g) for g in groups)
    return Board(caps, items, (*flop, *rest), groups)


def _add(
    items: dict[str, list[tuple[int, ...]]],
    reading: Cards,
    hole: tuple[int, ...],
    types: tuple[int, int],
    flop: tuple[int, ...],
    rest: tuple[int, ...],
    universe: frozenset[str],
) -> None:
    if reading is Cards.FIRST_FIVE:
        cls = classify_five(hole, flop)
    else:
        cards = (*hole, *flop, *rest)
        if universe <= _FULL_HOUSE_OR_BETTER and not _full_house_or_better_possible(cards):
            return
        cls = classify_seven(hole, flop, rest)
    if cls in universe:
        items[cls].append(types)


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


# ------------------------------------------------------------------ packing


def packable(board: Board, need: dict[str, int]) -> tuple[tuple[int, ...], ...] | None:
    """Disjoint card sets of each class, ``need[cls]`` of them, on this board, or None.

    Depth-first over the classes, scarcest first; within a class the item index never
    decreases, so a choice is visited once, not once per order.
    """
    order = sorted((cls for cls, n in need.items() if n), key=lambda c: len(board.items[c]))
    for cls in order:
        if not board.items[cls]:
            return None
    caps = list(board.caps)
    chosen: list[tuple[int, ...]] = []
    failed: set[tuple[object, ...]] = set()

    def walk(k: int, left: int, start: int) -> bool:
        if k == len(order):
            return True
        cls = order[k]
        if left == 0:
            return walk(k + 1, need[order[k + 1]] if k + 1 < len(order) else 0, 0)
        key = (k, left, start, tuple(caps))
        if key in failed:
            return False
        items = board.items[cls]
        for index in range(start, len(items)):
            item = items[index]
            if all(caps[t] >= item.count(t) for t in item):
                for t in item:
                    caps[t] -= 1
                chosen.append(item)
                if walk(k, left - 1, index):
                    return True
                chosen.pop()
                for t in item:
                    caps[t] += 1
        failed.add(key)
        return False

    if not order:
        return ()
    if walk(0, need[order[0]], 0):
        return tuple(chosen)
    return None


# ------------------------------------------------------------------ the walk


def _vectors(n_classes: int, size: int) -> Iterator[tuple[int, ...]]:
    if n_classes == 1:
        yield (size,)
        return
    for here in range(size, -1, -1):
        for rest in _vectors(n_classes - 1, size - here):
            yield (here, *rest)


@dataclass
class Result:
    """The walk's outcome for one reading."""

    classes: tuple[str, ...]
    impossible: list[tuple[int, ...]]
    witness: dict[tuple[int, ...], int]  # possible multiset -> board index
    boards: list[Board]


def minimal_impossible(
    reading: Cards, max_keyed: int, all_boards: list[Board] | None = None
) -> Result:
    """The minimal impossible multisets of classes, up to ``max_keyed`` keyed seats.

    ``all_boards`` is :func:`boards` of the reading, when the caller already has them.
    """
    classes = UNIVERSE[reading]
    if all_boards is None:
        all_boards = boards(reading)
    possible: dict[tuple[int, ...], int] = {(0,) * len(classes): 0}
    impossible: list[tuple[int, ...]] = []
    for size in range(1, max_keyed + 1):
        for vector in _vectors(len(classes), size):
            subs = []
            for i, n in enumerate(vector):
                if n:
                    sub = (*vector[:i], n - 1, *vector[i + 1 :])
                    subs.append(sub)
            if not all(s in possible for s in subs):
                continue
            need = {cls: n for cls, n in zip(classes, vector, strict=True) if n}
            tried: set[int] = set()
            found = None
            for s in subs:
                b = possible[s]
                if b in tried:
                    continue
                tried.add(b)
                if packable(all_boards[b], need) is not None:
                    found = b
                    break
            if found is None:
                wanted = frozenset(need)
                for b, board in enumerate(all_boards):
                    if b in tried or not wanted <= board.present:
                        continue
                    if packable(board, need) is not None:
                        found = b
                        break
            if found is None:
                impossible.append(vector)
            else:
                possible[vector] = found
    return Result(classes, impossible, possible, all_boards)


def deal(
    board: Board, need: dict[str, int]
) -> tuple[tuple[int, ...], dict[str, list[tuple[int, ...]]]] | None:
    """A concrete witness: the board's cards and, per class, the seats' own cards."""
    packing = packable(board, need)
    if packing is None:
        return None
    taken = [0] * len(board.caps)
    order = sorted((cls for cls, n in need.items() if n), key=lambda c: len(board.items[c]))
    hands: dict[str, list[tuple[int, ...]]] = {cls: [] for cls in order}
    position = 0
    for cls in order:
        for _ in range(need[cls]):
            item = packing[position]
            position += 1
            cards = []
            for t in item:
                cards.append(board.cards[t][taken[t]])
                taken[t] += 1
            hands[cls].append(tuple(cards))
    return board.example, hands


def table_source(results: Sequence[tuple[Cards, Result]], max_keyed: int) -> str:
    """The text of :mod:`progressived.engine.deck_table`."""
    lines = [
        '"""Generated by ``python -m progressived.par.deck``: do not edit by hand.',
        "",
        "For each reading, the minimal multisets of hand classes (class, count) that no deal",
        "of one 52-card deck gives to that many keyed seats at once, up to MAX_KEYED seats.",
        "See progressived.engine.deck (how the guard reads it) and progressived.par.deck",
        '(how it is computed)."""',
        "",
        f"MAX_KEYED = {max_keyed}",
        "",
        "UNIVERSE: dict[str, tuple[str, ...]] = {",
    ]
    for reading, result in results:
        names = ", ".join(f'"{c}"' for c in result.classes)
        lines.append(f'    "{reading.value}": ({names},),')
    lines += ["}", "", "IMPOSSIBLE: dict[str, tuple[tuple[tuple[str, int], ...], ...]] = {"]
    for reading, result in results:
        lines.append(f'    "{reading.value}": (')
        for vector in result.impossible:
            parts = ", ".join(
                f'("{c}", {n})' for c, n in zip(result.classes, vector, strict=True) if n
            )
            lines.append(f"        ({parts},),")
        lines.append("    ),")
    lines += ["}", ""]
    return "\n".join(lines)


def main() -> None:
    """Print the table (``python -m progressived.par.deck > progressived/engine/deck_table.py``)."""
    max_keyed = 12
    results = [(r, minimal_impossible(r, max_keyed)) for r in Cards]
    print(table_source(results, max_keyed), end="")


if __name__ == "__main__":
    main()
