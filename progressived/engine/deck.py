"""The one-deck guard: which sets of winning hands one round dealt from one deck can hold.

A dealer keys one hand per seat. A keyed set is possible exactly when some deal of one
52-card deck gives every keyed seat that hand (unkeyed seats may hold anything). Whether it
is depends on the reading (the paytable's ``cards``): Three Card Poker players hold three
cards each; hold'em players share a flop (first five) or a whole board (best of seven), so
one player's hand constrains the others' (a royal on the board is every player's best hand).

The limits are not written by hand. :mod:`progressived.par.deck` searches the deals by
computation and writes :mod:`progressived.engine.deck_table`: per reading, the *minimal*
impossible multisets of hand classes, up to ``MAX_KEYED`` seats. A keyed set is impossible
exactly when it contains one of them: possibility survives removing a keyed seat (that seat
may hold anything), so the impossible sets are the supersets of the minimal ones. The
tests check the table against the search and the search against brute-force enumeration.

Classes are finer than a paytable's rows where one row pays several (UTHP-02's
``royal-flush`` is a royal in hole cards and flop or one needing the turn or river): a
class is paid by the first hand of its chain the paytable lists, as the PAR sheet reads
it, and a keyed set is possible when some choice of classes for its rows is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import combinations_with_replacement, product

from progressived.core.paytable import Cards, Hand, Paytable
from progressived.engine.deck_table import IMPOSSIBLE, MAX_KEYED, UNIVERSE

_PLAIN: dict[str, tuple[Hand, ...]] = {
    "straight-flush": (Hand.STRAIGHT_FLUSH,),
    "four-of-a-kind": (Hand.FOUR_OF_A_KIND,),
    "full-house": (Hand.FULL_HOUSE,),
    "flush": (Hand.FLUSH,),
    "straight": (Hand.STRAIGHT,),
    "three-of-a-kind": (Hand.THREE_OF_A_KIND,),
}

#: Per reading, the classes a player's cards fall in and the paytable rows that may pay
#: each, in order of preference (the first row the paytable lists pays it). The PAR
#: sheet's chains (a test holds them equal).
CHAINS: dict[Cards, dict[str, tuple[Hand, ...]]] = {
    Cards.THREE_CARD: {
        "akq-spades": (Hand.AKQ_SPADES, Hand.STRAIGHT_FLUSH, Hand.STRAIGHT, Hand.FLUSH),
        "akq-suited": (Hand.AKQ_SUITED, Hand.STRAIGHT_FLUSH, Hand.STRAIGHT, Hand.FLUSH),
        "straight-flush": (Hand.STRAIGHT_FLUSH, Hand.STRAIGHT, Hand.FLUSH),
        "three-of-a-kind": (Hand.THREE_OF_A_KIND,),
        "straight": (Hand.STRAIGHT,),
        "flush": (Hand.FLUSH,),
    },
    Cards.FIRST_FIVE: {"royal-flush": (Hand.ROYAL_FLUSH, Hand.STRAIGHT_FLUSH), **_PLAIN},
    Cards.BEST_OF_SEVEN: {
        "royal-first-5": (Hand.ROYAL_FLUSH_FIRST_5, Hand.ROYAL_FLUSH, Hand.STRAIGHT_FLUSH),
        "royal-community": (Hand.COMMUNITY_ROYAL, Hand.ROYAL_FLUSH, Hand.STRAIGHT_FLUSH),
        "royal-other": (Hand.ROYAL_FLUSH, Hand.STRAIGHT_FLUSH),
        **_PLAIN,
    },
}

_READING = {
    Cards.THREE_CARD: "three cards per player",
    Cards.FIRST_FIVE: "two hole cards and a shared flop",
    Cards.BEST_OF_SEVEN: "two hole cards and a shared five-card board",
}


def row_classes(paytable: Paytable) -> dict[str, tuple[str, ...]]:
    """Each paytable row's hand id -> the classes it pays on the paytable's reading."""
    listed = {rule.hand for rule in paytable.hands}
    rows: dict[str, list[str]] = {rule.hand.value: [] for rule in paytable.hands}
    for cls, chain in CHAINS[paytable.cards].items():
        paid = next((hand for hand in chain if hand in listed), None)
        if paid is not None:
            rows[paid.value].append(cls)
    return {hand: tuple(classes) for hand, classes in rows.items()}


class Guard:
    """The one-deck check of one paytable: a handful of comparisons per key press."""

    def __init__(self, paytable: Paytable) -> None:
        self.reading = paytable.cards
        self.rows = row_classes(paytable)
        self._minimal = tuple(dict(combo) for combo in IMPOSSIBLE[paytable.cards.value])
        covered = set(UNIVERSE[paytable.cards.value])
        #: Classes this paytable pays that the table does not cover (none for shipped
        #: paytables: the tests hold it); keys of them are not checked.
        self.unchecked = tuple(sorted({cls for row in self.rows.values() for cls in row} - covered))

    def _choices(self, hands: Sequence[str]) -> Iterator[Counter[str]]:
        """Every multiset of classes the keyed rows can stand for."""
        per_row = Counter(hands)
        options = [
            combinations_with_replacement(self.rows.get(hand, ()), n) for hand, n in per_row.items()
        ]
        for picked in product(*options):
            yield Counter(cls for group in picked for cls in group)

    def _blocking(self, counts: Counter[str]) -> dict[str, int] | None:
        for combo in self._minimal:
            if all(counts[cls] >= n for cls, n in combo.items()):
                return combo
        return None

    def impossible(self, hands: Sequence[str]) -> tuple[str, ...] | None:
        """None when one deck can deal ``hands`` (one keyed row per seat) in one round.

        Otherwise the keyed rows that no deal gives at once (a smallest such part).
        """
        if len(hands) > MAX_KEYED:
            return tuple(hands)
        first: dict[str, int] | None = None
        for counts in self._choices(hands):
            combo = self._blocking(counts)
            if combo is None:
                return None
            first = first or combo
        if first is None:  # a row that pays no class
            return tuple(hands)
        return self._rows_of(first, hands)

    def _rows_of(self, combo: dict[str, int], hands: Sequence[str]) -> tuple[str, ...]:
        left = dict(combo)
        rows: list[str] = []
        for hand in hands:
            cls = next((c for c in self.rows.get(hand, ()) if left.get(c, 0) > 0), None)
            if cls is not None:
                left[cls] -= 1
                rows.append(hand)
        return tuple(rows)

    def reason(self, rows: Sequence[str]) -> str:
        """What one deck cannot deal, for the dealer."""
        counts = Counter(rows)
        parts = [f"{n} x {hand}" if n > 1 else hand for hand, n in counts.items()]
        what = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return f"impossible: one deck cannot deal {what} in one round ({_READING[self.reading]})"


_GUARDS: dict[int, tuple[Paytable, Guard]] = {}


def guard_for(paytable: Paytable) -> Guard:
    """The guard of a paytable, built once per paytable object (paytables are immutable).

    Keyed by identity, holding the paytable so its id cannot be reused while cached.
    """
    entry = _GUARDS.get(id(paytable))
    if entry is not None and entry[0] is paytable:
        return entry[1]
    if len(_GUARDS) >= 64:
        _GUARDS.clear()
    guard = Guard(paytable)
    _GUARDS[id(paytable)] = (paytable, guard)
    return guard
