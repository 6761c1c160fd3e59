"""Paytables as data: one TOML file per paytable in ``config/paytables/``.

A paytable says, for each hand id, how the progressive wager is paid (a percentage of a
named meter, "X for 1", "X to 1" or a fixed amount) and what envy bonus it triggers.
``cards`` says which of the player's cards the hands are read on (three cards, a hold'em
player's first five, or the best five of seven); it defaults by game and must fit it.
Loading refuses anything it cannot read exactly, naming the file, the key and the reason.
What one deck can deal in one round is computed from the cards, not written here
(:mod:`progressived.engine.deck`).
"""

from __future__ import annotations

import enum
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from progressived.money import UNITS_PER_CENT, MoneyError, display, display_exact, dollars


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


class _HandModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hand: Hand
    pays: str | int | Decimal
    meter: str = "main"
    envy: Decimal | int | str | None = None
    #: Accepted for files written before the one-deck guard computed its limits
    #: (progressived.engine.deck); ignored.
    max_per_round: int | None = Field(default=None, ge=1)
    note: str | None = None

    @field_validator("hand", mode="before")
    @classmethod
    def _known_hand(cls, value: Any) -> Any:
        if isinstance(value, str) and value not in {h.value for h in Hand}:
            known = ", ".join(h.value for h in Hand)
            raise ValueError(f"unknown hand {value!r} (known hands: {known})")
        return value


class _LimitModel(BaseModel):
    """An old hand-written ``[[limits]]`` entry: accepted, checked for its hands, ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hands: list[Hand] = Field(min_length=2)
    max_per_round: int = Field(ge=1)
    why: str


class _PaytableModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    name: str
    game: Game
    cards: Cards | None = None
    rule: str
    wager: Decimal | int | str
    envy_requires_trigger_wager: bool
    envy_rule: str
    hands: list[_HandModel] = Field(min_length=1)
    limits: list[_LimitModel] = Field(default_factory=list)  # ignored; see _LimitModel
    notes: list[str] = Field(default_factory=list)
    max_hands_per_player: int | None = Field(default=None, ge=1)
    hands_per_player_rule: str | None = None
    seed: Decimal | int | str | None = None
    seed_rule: str | None = None

    @field_validator("cards", mode="before")
    @classmethod
    def _known_cards(cls, value: Any) -> Any:
        if isinstance(value, str) and value not in {c.value for c in Cards}:
            known = ", ".join(c.value for c in Cards)
            raise ValueError(f"unknown reading {value!r} (known: {known})")
        return value

    @property
    def reading(self) -> Cards:
        """``cards`` as written, or the game's default."""
        return self.cards if self.cards is not None else GAME_CARDS[self.game][0]

    @model_validator(mode="after")
    def _no_duplicate_hands(self) -> _PaytableModel:
        seen: set[Hand] = set()
        for index, entry in enumerate(self.hands):
            if entry.hand in seen:
                raise ValueError(f"hands[{index}]: duplicate hand {entry.hand.value!r}")
            seen.add(entry.hand)
        for index, limit in enumerate(self.limits):
            for hand in limit.hands:
                if hand not in seen:
                    raise ValueError(
                        f"limits[{index}]: hand {hand.value!r} is not in this paytable"
                    )
        return self


@dataclass(frozen=True, slots=True)
class HandRule:
    """One row of a paytable."""

    hand: Hand
    pay: Pay
    envy: int  # units, for the paytable's wager; 0 = no envy


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


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "(top level)"


def _format_validation(path: str, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = _loc(
            tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        )
        msg = err["msg"]
        msg = msg.removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = "missing required field"
        elif err["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{path}: {loc}: {msg}")
    return "\n".join(lines)


def _check_cards(model: _PaytableModel, source: str) -> None:
    """The reading must be one the game deals, and every hand must be possible on it."""
    allowed = GAME_CARDS[model.game]
    if model.reading not in allowed:
        names = ", ".join(repr(c.value) for c in allowed)
        raise PaytableError(
            f"{source}: cards: {model.reading.value!r} does not fit game "
            f"{model.game.value!r} (allowed: {names})"
        )
    possible = CARDS_HANDS[model.reading]
    for index, entry in enumerate(model.hands):
        if entry.hand not in possible:
            raise PaytableError(
                f"{source}: hands[{index}] ({entry.hand.value}).hand: cannot occur when "
                f"cards = {model.reading.value!r}"
            )


def paytable_from_mapping(data: Mapping[str, Any], source: str = "<memory>") -> Paytable:
    """Validate a parsed TOML document into a :class:`Paytable`, or raise :class:`PaytableError`."""
    try:
        model = _PaytableModel.model_validate(dict(data))
    except ValidationError as exc:
        raise PaytableError(_format_validation(source, exc)) from None
    try:
        wager = dollars(model.wager)
    except MoneyError as exc:
        raise PaytableError(f"{source}: wager: {exc}") from None
    if wager <= 0:
        raise PaytableError(f"{source}: wager: must be positive")
    if wager % UNITS_PER_CENT:
        raise PaytableError(
            f"{source}: wager: {display_exact(wager)} is finer than a cent "
            "(a wager is a whole number of cents)"
        )
    _check_cards(model, source)
    rules = []
    for index, entry in enumerate(model.hands):
        key = f"hands[{index}] ({entry.hand.value})"
        try:
            pay = parse_pay(entry.pays, entry.meter)
        except (ValueError, MoneyError) as exc:
            raise PaytableError(f"{source}: {key}.pays: {exc}") from None
        envy = 0
        if entry.envy is not None:
            try:
                envy = dollars(entry.envy)
            except MoneyError as exc:
                raise PaytableError(f"{source}: {key}.envy: {exc}") from None
            if envy < 0:
                raise PaytableError(f"{source}: {key}.envy: negative envy amount")
        rules.append(HandRule(entry.hand, pay, envy))
    return Paytable(
        id=model.id,
        name=model.name,
        game=model.game,
        cards=model.reading,
        rule=model.rule,
        wager=wager,
        envy_requires_trigger_wager=model.envy_requires_trigger_wager,
        envy_rule=model.envy_rule,
        hands=tuple(rules),
        notes=tuple(model.notes),
        source=source,
        **_per_player_and_seed(model, source),
    )


def _per_player_and_seed(model: _PaytableModel, source: str) -> dict[str, Any]:
    """The optional hands-per-player limit and stated seed, each with its rule cited."""
    out: dict[str, Any] = {}
    if model.max_hands_per_player is not None:
        if not (model.hands_per_player_rule or "").strip():
            raise PaytableError(
                f"{source}: hands_per_player_rule: missing (cite the rule that limits the hands "
                "one player may play)"
            )
        out["max_hands_per_player"] = model.max_hands_per_player
        out["hands_per_player_rule"] = model.hands_per_player_rule
    if model.seed is not None:
        try:
            seed = dollars(model.seed)
        except MoneyError as exc:
            raise PaytableError(f"{source}: seed: {exc}") from None
        if seed <= 0:
            raise PaytableError(f"{source}: seed: must be positive")
        if not (model.seed_rule or "").strip():
            raise PaytableError(
                f"{source}: seed_rule: missing (cite the rule that makes the seed follow the wager)"
            )
        out["seed"] = seed
        out["seed_rule"] = model.seed_rule
    return out


def load_paytable(path: Path) -> Paytable:
    """Load and validate one paytable file."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle, parse_float=Decimal)
    except OSError as exc:
        raise PaytableError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PaytableError(f"{path}: not valid TOML: {exc}") from None
    table = paytable_from_mapping(data, str(path))
    if table.id != path.stem:
        raise PaytableError(f"{path}: id: {table.id!r} does not match the file name {path.stem!r}")
    return table


def default_paytable_dirs() -> list[Path]:
    """Where paytables are looked up when no directory is given.

    The copy shipped inside the installed package first, then ``config/paytables`` of a
    source checkout.
    """
    here = Path(__file__).resolve().parent
    return [here / "data" / "paytables", here.parent / "config" / "paytables"]


def paytable_dir(explicit: Path | None = None) -> Path:
    if explicit is not None:
        return explicit
    for candidate in default_paytable_dirs():
        if candidate.is_dir():
            return candidate
    raise PaytableError("no paytable directory found (give one with --paytables DIR)")


def available_paytables(directory: Path | None = None) -> list[str]:
    return sorted(p.stem for p in paytable_dir(directory).glob("*.toml"))


def find_paytable(paytable_id: str, directory: Path | None = None) -> Paytable:
    """Load the paytable with this id from ``directory`` (or the default directories)."""
    folder = paytable_dir(directory)
    path = folder / f"{paytable_id}.toml"
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", paytable_id) or not path.is_file():
        known = ", ".join(available_paytables(folder)) or "none"
        raise PaytableError(f"unknown paytable {paytable_id!r} in {folder} (available: {known})")
    return load_paytable(path)


def load_all(directory: Path | None = None) -> dict[str, Paytable]:
    folder = paytable_dir(directory)
    return {p.stem: load_paytable(p) for p in sorted(folder.glob("*.toml"))}
