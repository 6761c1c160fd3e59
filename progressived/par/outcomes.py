"""Outcome classes: disjoint sets of deals, each paid as the best hand its paytable lists.

A paytable names hands (``akq-spades``, ``straight-flush``, ...) that overlap: A-K-Q of
spades is also a straight flush and a straight. The counting modules split the deals into
*disjoint* outcome classes and give each a *chain* of hand ids, best first. A paytable pays
a class as the first hand of its chain that the paytable lists ("a hand is counted once, in
its best paying category"), or not at all. Keeping the chain next to the count is what lets
one count serve every paytable and lets the sheet state the reading it took.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from progressived.config.paytables import Hand, Paytable


@dataclass(frozen=True, slots=True)
class OutcomeClass:
    """A disjoint class of one player's deals and its probability per round."""

    id: str
    description: str
    chain: tuple[Hand, ...]
    probability: Fraction

    def paid_as(self, paytable: Paytable) -> Hand | None:
        """The hand this class is paid as on ``paytable`` (None: it loses)."""
        listed = {rule.hand for rule in paytable.hands}
        for hand in self.chain:
            if hand in listed:
                return hand
        return None


def hand_probabilities(
    classes: tuple[OutcomeClass, ...], paytable: Paytable
) -> dict[Hand, Fraction]:
    """P(the player is paid as each listed hand), summing the classes paid as it."""
    out = {rule.hand: Fraction(0) for rule in paytable.hands}
    for cls in classes:
        hand = cls.paid_as(paytable)
        if hand is not None:
            out[hand] += cls.probability
    return out


def readings(classes: tuple[OutcomeClass, ...], paytable: Paytable) -> list[str]:
    """Sentences stating how each paying class was read against this paytable."""
    lines = []
    for cls in classes:
        hand = cls.paid_as(paytable)
        if hand is None:
            continue
        if hand.value != cls.id:
            lines.append(f"{cls.description}: paid as {hand.value}")
    return lines
