"""Paytable files: one TOML file per paytable in ``config/paytables/`` (the loader).

A paytable says, for each hand id, how the progressive wager is paid (a percentage of a
named meter, "X for 1", "X to 1" or a fixed amount) and what envy bonus it triggers.
``cards`` says which of the player's cards the hands are read on (three cards, a hold'em
player's first five, or the best five of seven); it defaults by game and must fit it.
Loading refuses anything it cannot read exactly, naming the file, the key and the reason.
What one deck can deal in one round is computed from the cards, not written here
(:mod:`progressived.engine.deck`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from progressived.core.money import UNITS_PER_CENT, MoneyError, display_exact, dollars
from progressived.core.paytable import (
    CARDS_HANDS,
    GAME_CARDS,
    Cards,
    Game,
    Hand,
    HandRule,
    Pay,
    PayKind,
    Paytable,
    PaytableError,
    parse_pay,
    scale_amount,
)
from progressived.runtime.config_files import StrictModel, read_toml

__all__ = [
    "CARDS_HANDS",
    "GAME_CARDS",
    "Cards",
    "Game",
    "Hand",
    "HandRule",
    "Pay",
    "PayKind",
    "Paytable",
    "PaytableError",
    "available_paytables",
    "default_paytable_dirs",
    "find_paytable",
    "load_all",
    "load_paytable",
    "parse_pay",
    "paytable_dir",
    "paytable_from_mapping",
    "scale_amount",
]


NAME_CHARS = 40  # a hand's name: one line of a paytable on a sign
TITLE_CHARS = 60  # the game's title: the sign's heading


def _shown_text(value: str | None, longest: int) -> str | None:
    """A name a sign shows: trimmed, not empty, at most ``longest`` characters, printable."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        raise ValueError("must not be empty (leave the key out for the built-in name)")
    if len(text) > longest:
        raise ValueError(f"{len(text)} characters; a sign shows at most {longest}")
    if not text.isprintable():
        raise ValueError("control characters cannot be shown")
    return text


class _HandModel(StrictModel):

    hand: Hand
    # What players read on the sign, in the rule text's words ("AKQ Spades").
    name: str | None = None
    pays: str | int | Decimal
    meter: str = "main"
    envy: Decimal | int | str | None = None
    #: Accepted for files written before the one-deck guard computed its limits
    #: (progressived.engine.deck); ignored.
    max_per_round: int | None = Field(default=None, ge=1)
    note: str | None = None

    @field_validator("name")
    @classmethod
    def _shown_name(cls, value: str | None) -> str | None:
        return _shown_text(value, NAME_CHARS)

    @field_validator("hand", mode="before")
    @classmethod
    def _known_hand(cls, value: Any) -> Any:
        if isinstance(value, str) and value not in {h.value for h in Hand}:
            known = ", ".join(h.value for h in Hand)
            raise ValueError(f"unknown hand {value!r} (known hands: {known})")
        return value


class _LimitModel(StrictModel):
    """An old hand-written ``[[limits]]`` entry: accepted, checked for its hands, ignored."""

    hands: list[Hand] = Field(min_length=2)
    max_per_round: int = Field(ge=1)
    why: str


class _PaytableModel(StrictModel):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    name: str
    # The game's name as players read it ("Three Card Poker Progressive").
    title: str | None = None
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

    @field_validator("title")
    @classmethod
    def _shown_title(cls, value: str | None) -> str | None:
        return _shown_text(value, TITLE_CHARS)

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
        rules.append(HandRule(entry.hand, pay, envy, entry.name or ""))
    return Paytable(
        id=model.id,
        name=model.name,
        title=model.title or "",
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
    table = paytable_from_mapping(read_toml(path, PaytableError), str(path))
    if table.id != path.stem:
        raise PaytableError(f"{path}: id: {table.id!r} does not match the file name {path.stem!r}")
    return table


def default_paytable_dirs() -> list[Path]:
    """Where paytables are looked up when no directory is given.

    The copy shipped inside the installed package first, then ``config/paytables`` of a
    source checkout.
    """
    here = Path(__file__).resolve().parent.parent  # the package's folder
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
