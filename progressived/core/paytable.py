"""Paytables as values: hands, games, pays and the validated :class:`Paytable` (pure).

The pure half of the paytables: no file, no TOML, no validation library, so the engine can
use it (the import-linter contract ``pure`` checks the engine's imports transitively).
Reading paytable files -- TOML, validation, search directories -- is
:mod:`progressived.config.paytables`.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from progressived.core.money import MoneyError, display, dollars


class Hand(enum.StrEnum):
    """Hand ids. These strings are a contract: keypad maps, ledgers and signs use them."""

    AKQ_SPADES = "akq-spades"
    AKQ_SUITED = "akq-suited"
    ROYAL_FLUSH = "royal-flush"
    ROYAL_FLUSH_FIRST_5 = "royal-flush-first-5"
    COMMUNITY_ROYAL = "community-royal"
    STRAIGHT_FLUSH = "straight-flush"
    FOUR_OF_A_KIND = "four-of-a-kind"
    FULL_HOUSE = "full-house"
    FLUSH = "flush"
    STRAIGHT = "straight"
    THREE_OF_A_KIND = "three-of-a-kind"


class Game(enum.StrEnum):
    """The games whose progressive rules are implemented."""

    THREE_CARD_POKER = "three-card-poker"
    ULTIMATE_TEXAS_HOLDEM = "ultimate-texas-holdem"


class Cards(enum.StrEnum):
    """Which of the player's cards a paytable's hands are read on.

    The same hand names mean very different odds on different cards: a flush in the best
    five of seven cards is about 1 in 33, in the first five cards about 1 in 509. The
    paytable has to say which it means, and the PAR sheet counts on that.
    """

    THREE_CARD = "three-card"  # Three Card Poker: the player's three cards
    FIRST_FIVE = "first-five"  # hold'em: the two hole cards and the three flop cards
    BEST_OF_SEVEN = "best-of-seven"  # hold'em: the best five of hole cards and the board


#: The readings each game allows; the first is the default when a file does not say.
GAME_CARDS: dict[Game, tuple[Cards, ...]] = {
    Game.THREE_CARD_POKER: (Cards.THREE_CARD,),
    Game.ULTIMATE_TEXAS_HOLDEM: (Cards.BEST_OF_SEVEN, Cards.FIRST_FIVE),
}

#: The hands that can occur on each reading. ``community-royal`` and
#: ``royal-flush-first-5`` split the seven cards by position, so they have no meaning on
#: the first five alone; A-K-Q hands are three-card hands.
CARDS_HANDS: dict[Cards, frozenset[Hand]] = {
    Cards.THREE_CARD: frozenset(
        {
            Hand.AKQ_SPADES,
            Hand.AKQ_SUITED,
            Hand.STRAIGHT_FLUSH,
            Hand.THREE_OF_A_KIND,
            Hand.STRAIGHT,
            Hand.FLUSH,
        }
    ),
    Cards.FIRST_FIVE: frozenset(
        {
            Hand.ROYAL_FLUSH,
            Hand.STRAIGHT_FLUSH,
            Hand.FOUR_OF_A_KIND,
            Hand.FULL_HOUSE,
            Hand.FLUSH,
            Hand.STRAIGHT,
            Hand.THREE_OF_A_KIND,
        }
    ),
    Cards.BEST_OF_SEVEN: frozenset(
        {
            Hand.ROYAL_FLUSH,
            Hand.ROYAL_FLUSH_FIRST_5,
            Hand.COMMUNITY_ROYAL,
            Hand.STRAIGHT_FLUSH,
            Hand.FOUR_OF_A_KIND,
            Hand.FULL_HOUSE,
            Hand.FLUSH,
            Hand.STRAIGHT,
            Hand.THREE_OF_A_KIND,
        }
    ),
}


#: What players read for each hand when its paytable names none (``name`` in a paytable
#: file takes the rule text's own words): signs and rack cards never show the hand ids.
HAND_NAMES: dict[Hand, str] = {
    Hand.AKQ_SPADES: "AKQ Spades",
    Hand.AKQ_SUITED: "AKQ Suited",
    Hand.ROYAL_FLUSH: "Royal Flush",
    Hand.ROYAL_FLUSH_FIRST_5: "Royal Flush - First 5 Cards",
    Hand.COMMUNITY_ROYAL: "Community Royal",
    Hand.STRAIGHT_FLUSH: "Straight Flush",
    Hand.FOUR_OF_A_KIND: "Four of a Kind",
    Hand.FULL_HOUSE: "Full House",
    Hand.FLUSH: "Flush",
    Hand.STRAIGHT: "Straight",
    Hand.THREE_OF_A_KIND: "Three of a Kind",
}

#: The game's name on a sign when its paytable gives no ``title``.
GAME_TITLES: dict[Game, str] = {
    Game.THREE_CARD_POKER: "Three Card Poker",
    Game.ULTIMATE_TEXAS_HOLDEM: "Ultimate Texas Hold'em",
}


class PayKind(enum.StrEnum):
    PERCENT_OF_METER = "percent"
    FOR_ONE = "for-1"
    TO_ONE = "to-1"
    FIXED = "fixed"


class PaytableError(ValueError):
    """A paytable file that cannot be used; the message names file, key and reason."""


_PERCENT_RE = re.compile(r"^(?P<n>-?[0-9]+(?:\.[0-9]+)?)\s*%$")
_ODDS_RE = re.compile(r"^(?P<n>-?[0-9][0-9,]*)\s+(?P<kind>for|to)\s+1$")


@dataclass(frozen=True, slots=True)
class Pay:
    """How one winning hand is paid, for the paytable's wager.

    ``percent`` is a fraction of the meter for ``PERCENT_OF_METER``; ``multiple`` the
    X of "X for 1" / "X to 1"; ``amount`` the units of a fixed pay.
    """

    kind: PayKind
    percent: Fraction = Fraction(0)
    meter: str = "main"
    multiple: int = 0
    amount: int = 0

    @property
    def from_meter(self) -> bool:
        return self.kind is PayKind.PERCENT_OF_METER

    def tray_amount(self, wager: int, base_wager: int) -> int:
        """The units paid from the tray for a wager of ``wager`` units.

        Fixed amounts are stated for ``base_wager`` and scale with the wager, as the rules
        say envy and fixed pays "adjust up or down accordingly with changes made to the
        wager amount". ``to 1`` returns the wager; ``for 1`` does not.
        """
        if self.kind is PayKind.FOR_ONE:
            return self.multiple * wager
        if self.kind is PayKind.TO_ONE:
            return self.multiple * wager + wager
        if self.kind is PayKind.FIXED:
            return scale_amount(self.amount, wager, base_wager)
        raise ValueError("a meter percentage is not a tray pay")

    def describe(self) -> str:
        if self.kind is PayKind.PERCENT_OF_METER:
            pct = self.percent * 100
            text = str(pct.numerator) if pct.denominator == 1 else str(float(pct))
            return f"{text}% of {self.meter}"
        if self.kind is PayKind.FOR_ONE:
            return f"{self.multiple} for 1"
        if self.kind is PayKind.TO_ONE:
            return f"{self.multiple} to 1"
        return display(self.amount)


def scale_amount(amount: int, wager: int, base_wager: int) -> int:
    """Scale a fixed amount stated for ``base_wager`` to ``wager`` exactly (checked at load)."""
    if wager == base_wager:
        return amount
    scaled = Fraction(amount * wager, base_wager)
    if scaled.denominator != 1:
        raise PaytableError(f"amount {amount} does not scale exactly to a wager of {wager} units")
    return int(scaled)


def parse_pay(text: str | int | Decimal, meter: str) -> Pay:
    """Parse a pay as a rack card writes it: ``100%``, ``500 for 1``, ``3,000 to 1``, ``$2,500``."""
    if isinstance(text, (int, Decimal)) and not isinstance(text, bool):
        units = dollars(text)
        if units < 0:
            raise ValueError("negative pay")
        return Pay(PayKind.FIXED, amount=units)
    if not isinstance(text, str):
        raise ValueError(f"a pay must be text such as '100%', '500 for 1', '$2,500', not {text!r}")
    value = text.strip()
    if match := _PERCENT_RE.match(value):
        pct = Fraction(Decimal(match.group("n"))) / 100
        if pct < 0:
            raise ValueError("negative pay")
        if pct == 0:
            raise ValueError("a percentage pay of 0% pays nothing")
        if pct > 1:
            raise ValueError(f"percentage {match.group('n')}% is above 100%")
        return Pay(PayKind.PERCENT_OF_METER, percent=pct, meter=meter)
    if match := _ODDS_RE.match(value):
        multiple = int(match.group("n").replace(",", ""))
        if multiple < 0:
            raise ValueError("negative pay")
        kind = PayKind.FOR_ONE if match.group("kind") == "for" else PayKind.TO_ONE
        return Pay(kind, multiple=multiple)
    try:
        units = dollars(value)
    except MoneyError:
        raise ValueError(
            f"cannot read pay {text!r}: write '100%', '500 for 1', '3,000 to 1' or '$2,500'"
        ) from None
    if units < 0:
        raise ValueError("negative pay")
    return Pay(PayKind.FIXED, amount=units)


@dataclass(frozen=True, slots=True)
class HandRule:
    """One row of a paytable."""

    hand: Hand
    pay: Pay
    envy: int  # units, for the paytable's wager; 0 = no envy
    name: str = ""  # what players read (the rule text's words); left out: the built-in name

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", HAND_NAMES[self.hand])


@dataclass(frozen=True, slots=True)
class Paytable:
    """A validated paytable. Amounts are units for ``wager``."""

    id: str
    name: str
    game: Game
    cards: Cards
    rule: str
    wager: int
    envy_requires_trigger_wager: bool
    envy_rule: str
    hands: tuple[HandRule, ...]
    notes: tuple[str, ...] = ()
    source: str = "<memory>"
    # The most spots one player may play in a round (None: no limit), and the rule saying so.
    max_hands_per_player: int | None = None
    hands_per_player_rule: str = ""
    # The meter's seed and reset amount for ``wager`` (None: the configuration's), scaled
    # with the configured wager like envy amounts; ``seed_rule`` cites why.
    seed: int | None = None
    seed_rule: str = ""
    # The game's name as players read it on a sign (left out: the game's built-in name).
    title: str = ""

    def __post_init__(self) -> None:
        if not self.title:
            object.__setattr__(self, "title", GAME_TITLES[self.game])

    def rule_for(self, hand: Hand | str) -> HandRule | None:
        for rule in self.hands:
            if rule.hand == hand:
                return rule
        return None

    @property
    def hand_ids(self) -> tuple[str, ...]:
        return tuple(rule.hand.value for rule in self.hands)

    @property
    def meters(self) -> frozenset[str]:
        """The meters this paytable's percentage pays draw on."""
        return frozenset(r.pay.meter for r in self.hands if r.pay.from_meter)
