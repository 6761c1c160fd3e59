"""The dealer's keypad map: which key codes mean what, read from the configuration.

The configuration side of the keypad (a validated ``[keypad]`` section, loaded from TOML);
the key-sequence interpreter that uses it is pure and lives in :mod:`progressived.board.keypad`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from progressived.board.keypad import MAX_SEATS, KeypadError
from progressived.config.table import ConfigError, format_validation_error, read_toml
from progressived.core.paytable import Hand
from progressived.runtime.config_files import StrictModel

__all__ = ["MAX_SEATS", "KeypadError", "KeypadMap", "keypad_from_config", "load_keypad"]

_CODE_RE = re.compile(r"^[!-~]{1,16}$")  # printable ASCII, no spaces (the wire allows 16)


def _default_seats() -> list[str]:
    return [f"S{n}" for n in range(1, MAX_SEATS + 1)]


class KeypadMap(StrictModel):
    """The ``[keypad]`` configuration section: the key code of every function.

    ``seats[i]`` is the key of seat ``i + 1``. ``hands`` maps hand ids (see
    :class:`progressived.config.paytables.Hand`) to key codes; when it is empty the hands of the
    table's paytable get ``H1``, ``H2``, ... in the paytable's order.
    """

    lock: str = "LOCK"
    seats: list[str] = Field(default_factory=_default_seats, min_length=1, max_length=MAX_SEATS)
    hands: dict[str, str] = Field(default_factory=dict)
    supervisor: str = "SUP"
    confirm: str = "OK"
    reject: str = "NO"
    void: str = "VOID"
    same_player: str = "SAME"
    reconcile: str = "RECON"
    clear: str = "CLR"
    sequence_timeout_s: float = Field(default=10.0, gt=0, le=300)

    @field_validator(
        "lock", "supervisor", "confirm", "reject", "void", "same_player", "reconcile", "clear"
    )
    @classmethod
    def _code(cls, value: str) -> str:
        return _check_code(value)

    @field_validator("seats")
    @classmethod
    def _seat_codes(cls, value: list[str]) -> list[str]:
        return [_check_code(v) for v in value]

    @field_validator("hands")
    @classmethod
    def _hand_codes(cls, value: dict[str, str]) -> dict[str, str]:
        known = {h.value for h in Hand}
        for hand, code in value.items():
            if hand not in known:
                raise ValueError(f"unknown hand id {hand!r} (known: {', '.join(sorted(known))})")
            _check_code(code)
        return value

    @model_validator(mode="after")
    def _no_code_twice(self) -> KeypadMap:
        seen: dict[str, str] = {}
        for name, code in self._named_codes():
            if code in seen:
                raise ValueError(f"key code {code!r} used for both {seen[code]} and {name}")
            seen[code] = name
        return self

    def _named_codes(self) -> list[tuple[str, str]]:
        out = [
            ("LOCK", self.lock),
            ("SUPERVISOR", self.supervisor),
            ("CONFIRM", self.confirm),
            ("REJECT", self.reject),
            ("VOID", self.void),
            ("SAME-PLAYER", self.same_player),
            ("RECONCILE", self.reconcile),
            ("CLEAR", self.clear),
        ]
        out += [(f"SEAT{n}", code) for n, code in enumerate(self.seats, start=1)]
        out += [(f"hand {hand}", code) for hand, code in self.hands.items()]
        return out

    def hand_codes(self, hand_ids: Sequence[str]) -> dict[str, str]:
        """hand id -> key code for a paytable's hands (the defaults when ``hands`` is empty)."""
        if not self.hands:
            codes = {hand: f"H{n}" for n, hand in enumerate(hand_ids, start=1)}
            taken = {code for _, code in self._named_codes()}
            clash = sorted(set(codes.values()) & taken)
            if clash:
                raise KeypadError(f"default hand keys {clash} are also used for other functions")
            return codes
        missing = [hand for hand in hand_ids if hand not in self.hands]
        if missing:
            raise KeypadError(f"no key for the paytable's hands: {', '.join(missing)}")
        return {hand: self.hands[hand] for hand in hand_ids}


def _check_code(value: str) -> str:
    if not _CODE_RE.match(value):
        raise ValueError(f"key code {value!r}: 1 to 16 printable ASCII characters, no spaces")
    return value


class _KeypadSection(BaseModel):
    model_config = ConfigDict(extra="allow")

    keypad: KeypadMap = Field(default_factory=KeypadMap)


def keypad_from_config(data: Mapping[str, Any], source: str = "<memory>") -> KeypadMap:
    """The ``[keypad]`` section of a configuration mapping (defaults when absent)."""
    try:
        return _KeypadSection.model_validate(dict(data)).keypad
    except ValidationError as exc:
        raise ConfigError(format_validation_error(source, exc, _KeypadSection)) from None


def load_keypad(path: Path) -> KeypadMap:
    return keypad_from_config(read_toml(path), str(path))
