"""Which keyed sets one deck can deal, by search over card assignments.

This computes the table the one-deck guard (:mod:`progressived.engine.deck`) reads: for
each reading, the minimal multisets of hand classes that no deal of one 52-card deck gives
to that many seats at once. The boards and the hands each allows are
:mod:`progressived.par.deck_boards`; on a board the question for a multiset
{class: count} is a packing one, choose ``count`` disjoint hands of each class, which
:func:`packable` answers by depth-first search over card types with capacities.

:func:`minimal_impossible` walks multisets by size: a multiset all of whose one-smaller
subsets are possible is searched on every board; if no board packs it, it is a minimal
impossible set. Possible sets keep the deal that gave them, tried first for their
supersets. ``python -m progressived.par.deck > progressived/engine/deck_table.py``
regenerates the table.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from progressived.config.paytables import Cards
from progressived.par.deck_boards import UNIVERSE, Board, boards

# ------------------------------------------------------------------ packing

Packing = tuple[tuple[str, tuple[int, ...]], ...]  # per keyed seat: class, card types


def packable(board: Board, need: dict[str, int]) -> Packing | None:
    """Disjoint card sets of each class, ``need[cls]`` of them, on this board, or None.

    Depth-first over the classes, scarcest first; within a class the item index never
    decreases, so a choice is visited once, not once per order. A branch is cut when the
    cards left in the types the remaining classes use cannot cover what they still need
    (each class alone and all together), and a state already refuted is not searched again.
    """
    order = sorted((cls for cls, n in need.items() if n), key=lambda c: len(board.items[c]))
    if not order:
        return ()
    if any(not board.items[cls] for cls in order):
        return None
    caps = list(board.caps)
    chosen: list[tuple[str, tuple[int, ...]]] = []
    failed: set[tuple[object, ...]] = set()
    uses = board.uses
    size = {cls: len(board.items[cls][0]) for cls in order}
    types = [board.types[cls] for cls in order]
    suffix = [frozenset().union(*types[k:]) for k in range(len(order))]

    def enough(k: int, left: int) -> bool:
        total = 0
        for j in range(k, len(order)):
            wanted = (left if j == k else need[order[j]]) * size[order[j]]
            if sum(caps[t] for t in types[j]) < wanted:
                return False
            total += wanted
        return sum(caps[t] for t in suffix[k]) >= total

    def walk(k: int, left: int, start: int) -> bool:
        if left == 0:
            k += 1
            if k == len(order):
                return True
            left, start = need[order[k]], 0
        key = (k, left, start, tuple(caps))
        if key in failed:
            return False
        if enough(k, left):
            cls = order[k]
            items = board.items[cls]
            item_uses = uses[cls]
            for index in range(start, len(items)):
                use = item_uses[index]
                if all(caps[t] >= n for t, n in use):
                    for t, n in use:
                        caps[t] -= n
                    chosen.append((cls, items[index]))
                    if walk(k, left - 1, index):
                        return True
                    chosen.pop()
                    for t, n in use:
                        caps[t] += n
        failed.add(key)
        return False

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
    witness: dict[tuple[int, ...], tuple[int, Packing]]  # possible -> board index, deal
    boards: list[Board]


def _one_more(board: Board, packing: Packing, cls: str) -> Packing | None:
    """``packing`` and one more disjoint hand of ``cls`` on the same board, if one is left."""
    caps = list(board.caps)
    for _, item in packing:
        for t in item:
            caps[t] -= 1
    for item, use in zip(board.items[cls], board.uses[cls], strict=True):
        if all(caps[t] >= n for t, n in use):
            return (*packing, (cls, item))
    return None


def minimal_impossible(
    reading: Cards, max_keyed: int, all_boards: list[Board] | None = None
) -> Result:
    """The minimal impossible multisets of classes, up to ``max_keyed`` keyed seats.

    ``all_boards`` is :func:`boards` of the reading, when the caller already has them. A
    superset of a possible set is first tried as that set's deal plus one hand, then by a
    full packing on the boards that dealt its subsets, then on every board.
    """
    classes = UNIVERSE[reading]
    if all_boards is None:
        all_boards = boards(reading)
    found: dict[tuple[int, ...], tuple[int, Packing]] = {(0,) * len(classes): (0, ())}
    impossible: list[tuple[int, ...]] = []
    for size in range(1, max_keyed + 1):
        for vector in _vectors(len(classes), size):
            subs = [
                ((*vector[:i], n - 1, *vector[i + 1 :]), classes[i])
                for i, n in enumerate(vector)
                if n
            ]
            if not all(sub in found for sub, _ in subs):
                continue
            dealt = _deal_superset(all_boards, found, subs, vector, classes)
            if dealt is None:
                impossible.append(vector)
            else:
                found[vector] = dealt
    return Result(classes, impossible, found, all_boards)


def _deal_superset(
    all_boards: list[Board],
    found: dict[tuple[int, ...], tuple[int, Packing]],
    subs: list[tuple[tuple[int, ...], str]],
    vector: tuple[int, ...],
    classes: tuple[str, ...],
) -> tuple[int, Packing] | None:
    for sub, cls in subs:
        b, dealt = found[sub]
        more = _one_more(all_boards[b], dealt, cls)
        if more is not None:
            return b, more
    need = {cls: n for cls, n in zip(classes, vector, strict=True) if n}
    tried: set[int] = set()
    for sub, _ in subs:
        b = found[sub][0]
        if b not in tried:
            tried.add(b)
            if (packing := packable(all_boards[b], need)) is not None:
                return b, packing
    wanted = frozenset(need)
    for b, board in enumerate(all_boards):
        if b in tried or not wanted <= board.present:
            continue
        if (packing := packable(board, need)) is not None:
            return b, packing
    return None


def deal(
    board: Board, packing: Packing
) -> tuple[tuple[int, ...], list[tuple[str, tuple[int, ...]]]]:
    """A packing as concrete cards: the board's, and each keyed seat's class and own cards."""
    taken = [0] * len(board.caps)
    seats = []
    for cls, item in packing:
        cards = []
        for t in item:
            cards.append(board.cards[t][taken[t]])
            taken[t] += 1
        seats.append((cls, tuple(cards)))
    return board.example, seats


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
        lines.append(f'    "{reading.value}": (')
        lines += [f'        "{c}",' for c in result.classes]
        lines.append("    ),")
    lines += ["}", "", "IMPOSSIBLE: dict[str, tuple[tuple[tuple[str, int], ...], ...]] = {"]
    for reading, result in results:
        lines.append(f'    "{reading.value}": (')
        for vector in result.impossible:
            parts = ", ".join(
                f'("{c}", {n})' for c, n in zip(result.classes, vector, strict=True) if n
            )
            lines.append(f"        ({parts},)," if "), (" not in parts else f"        ({parts}),")
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
