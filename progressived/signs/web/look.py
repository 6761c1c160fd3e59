"""What the sign knows beyond MQTT, as plain values: names, paytables, colours, timings.

Kept apart from the file's validation (:mod:`.config`, pydantic) so the server and the
renderer run without it: a sign started without ``--config`` does not pay for pydantic's
import (about 8 MB of a small kiosk computer's memory).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from progressived.core.paytable import Paytable

SourceKind = Literal["table", "link"]  # what a sign shows: a table, or a link's meters
SOURCE_KINDS: tuple[SourceKind, ...] = get_args(SourceKind)

MIN_CONTRAST = 7.0  # WCAG 2 AAA for text: every text colour against its background


def luminance(colour: str) -> float:
    """WCAG 2 relative luminance of ``#rrggbb``."""

    def channel(hex2: str) -> float:
        c = int(hex2, 16) / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(colour[i : i + 2]) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fore: str, back: str) -> float:
    """WCAG 2 contrast ratio of two ``#rrggbb`` colours (1 to 21)."""
    light, dark = sorted((luminance(fore), luminance(back)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


@dataclass(frozen=True)
class Colours:
    """The sign's colours (``[sign.colours]``); each text colour at least 7:1 on its ground."""

    background: str = "#05070c"
    text: str = "#f4f6fb"  # names, the paytable, the status line
    title: str = "#ffd34d"  # the game's title
    meter: str = "#ffd34d"  # the jackpot's digits
    pending: str = "#ffb84d"  # PENDING
    closed: str = "#ff9d94"  # CLOSED and the reason; STALE's fault message
    dimmed: str = "#a9afbb"  # a CLOSED meter's digits: dimmed, still readable
    winner_background: str = "#ffd34d"
    winner_text: str = "#1a1300"


@dataclass(frozen=True)
class SourceLook:
    """What the sign knows of one table or link beyond MQTT: names and its paytable."""

    kind: SourceKind
    id: str
    name: str = ""
    paytable: Paytable | None = None
    wager: int | None = None  # units; None: the paytable's
    levels: dict[str, str] = field(default_factory=dict)
    show: bool = True


@dataclass(frozen=True)
class SignConfig:
    """The validated file (or the defaults when there is none)."""

    title: str = ""
    logo: bytes = b""
    logo_type: str = ""
    banner_s: float = 30.0
    odometer_ms: int = 800
    colours: Colours = field(default_factory=Colours)
    sources: dict[str, SourceLook] = field(default_factory=dict)  # "table/<id>" -> look
    source: str = "<defaults>"

    def look(self, kind: str, ident: str) -> SourceLook:
        found = self.sources.get(f"{kind}/{ident}")
        if found is not None:
            return found
        return SourceLook("link" if kind == "link" else "table", ident)

    def shown(self, kind: SourceKind) -> tuple[str, ...]:
        """The ids of this kind the file asks the sign to show."""
        return tuple(s.id for s in self.sources.values() if s.kind == kind and s.show)

    def table_name(self, ident: str) -> str:
        """A table's name for players, or its id (its asset number) when none is set."""
        look = self.sources.get(f"table/{ident}")
        return look.name if look is not None and look.name else ident


