"""The web sign's own file: ``progressivectl sign --web --config sign.toml`` (docs/sign.md).

Validation only: what it produces is :mod:`.look`'s plain :class:`SignConfig`.


What the floor's marketing and staff set: the sign's title, colours and logo, how long a
winner is celebrated, the odometer's pace, which tables and links it shows, the names
players read for them ("Table 7" for ``tcp-07``), and the paytable each one plays, so
the sign can show the hands' names and today's amounts. Validated with pydantic like the
other configuration files; an error names the file, the key and the reason. Colours are
refused unless every text colour keeps a contrast of at least 7:1 (WCAG AAA) against the
background it is drawn on: a sign is read from across the pit.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from progressived.config.paytables import Paytable, PaytableError, load_paytable, paytable_dir
from progressived.core.money import UNITS_PER_CENT, MoneyError, dollars
from progressived.runtime.config_files import StrictModel, read_toml
from progressived.signs.web.look import (
    MIN_CONTRAST,
    Colours,
    SignConfig,
    SourceKind,
    SourceLook,
    contrast,
)

LOGO_BYTES = 1024 * 1024  # a logo is read once at start and served from memory
LOGO_TYPES = {
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
}
_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"  # a table, link or meter id as topics carry it
_HEX = re.compile(r"^#[0-9a-fA-F]{6}$")


class SignConfigError(ValueError):
    """A sign file that cannot be used; the message names the file, the key and the reason."""


def _shown(value: str | None, longest: int) -> str | None:
    if value is None:
        return None
    text = value.strip()
    if not text or len(text) > longest or not text.isprintable():
        raise ValueError(f"must be 1 to {longest} printable characters")
    return text


class ColoursSection(StrictModel):
    """``[sign.colours]``: every colour ``#rrggbb``; text colours keep 7:1 on their ground
    (the defaults are :class:`Colours`'s)."""

    background: str = Colours.background
    text: str = Colours.text
    title: str = Colours.title
    meter: str = Colours.meter
    pending: str = Colours.pending
    closed: str = Colours.closed
    dimmed: str = Colours.dimmed
    winner_background: str = Colours.winner_background
    winner_text: str = Colours.winner_text

    @field_validator("*")
    @classmethod
    def _hex(cls, value: str) -> str:
        if not _HEX.match(value):
            raise ValueError(f"{value!r} is not a colour #rrggbb")
        return value.lower()

    @model_validator(mode="after")
    def _readable(self) -> ColoursSection:
        pairs = [
            (name, getattr(self, name), "background", self.background)
            for name in ("text", "title", "meter", "pending", "closed", "dimmed")
        ]
        pairs.append(("winner_text", self.winner_text, "winner_background", self.winner_background))
        for name, fore, ground, back in pairs:
            ratio = contrast(fore, back)
            if ratio < MIN_CONTRAST:
                raise ValueError(
                    f"{name} {fore} on {ground} {back} has a contrast of {ratio:.2f}:1; "
                    f"a sign needs at least {MIN_CONTRAST:g}:1"
                )
        return self


class SourceSection(StrictModel):
    """One ``[[sign.tables]]`` or ``[[sign.links]]`` entry: how the sign presents it."""

    id: str = Field(pattern=_ID)
    name: str | None = None  # what players read ("Table 7"); none: the id is not shown
    paytable: str | None = None  # the paytable it plays (an id in `paytables`)
    wager: Decimal | int | str | None = None  # the configured wager; none: the paytable's
    levels: dict[str, str] = Field(default_factory=dict)  # meter id -> name ("Grand")
    show: bool = True  # false: only named (a linked table named on its link's banner)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return _shown(value, 40)

    @field_validator("levels")
    @classmethod
    def _levels(cls, value: dict[str, str]) -> dict[str, str]:
        for meter, name in value.items():
            if not re.match(_ID, meter):
                raise ValueError(f"{meter!r} is not a meter id")
            _shown(name, 40)
        return {meter: name.strip() for meter, name in value.items()}


class SignSection(StrictModel):
    """``[sign]``: the whole file's one table."""

    title: str | None = None  # over every page; none: each source's game title
    logo: Path | None = None  # PNG, SVG, JPEG or WebP, at most 1 MiB, shown beside the title
    banner_s: float = Field(default=30.0, ge=0, le=3600)  # a winner is celebrated this long
    odometer_ms: int = Field(default=800, ge=0, le=1000)  # an increase rolls up this long
    paytables: Path | None = None  # where `paytable` ids are found; none: the shipped ones
    colours: ColoursSection = Field(default_factory=ColoursSection)
    tables: list[SourceSection] = Field(default_factory=list)
    links: list[SourceSection] = Field(default_factory=list)

    @field_validator("title")
    @classmethod
    def _title(cls, value: str | None) -> str | None:
        return _shown(value, 60)

    @model_validator(mode="after")
    def _unique(self) -> SignSection:
        for kind, entries in (("tables", self.tables), ("links", self.links)):
            ids = [entry.id for entry in entries]
            for ident in ids:
                if ids.count(ident) > 1:
                    raise ValueError(f"{kind}: {ident!r} is listed twice")
        return self


class _SignFile(StrictModel):
    sign: SignSection = Field(default_factory=SignSection)


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out or "(top level)"


def _look(
    source: str, kind: SourceKind, index: int, entry: SourceSection, folder: Path
) -> SourceLook:
    key = f"sign.{kind}s[{index}]"
    table: Paytable | None = None
    if entry.paytable is not None:
        path = folder / f"{entry.paytable}.toml"
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", entry.paytable) or not path.is_file():
            raise SignConfigError(
                f"{source}: {key}.paytable: no paytable {entry.paytable!r} in {folder}"
            )
        try:
            table = load_paytable(path)
        except PaytableError as exc:
            raise SignConfigError(f"{source}: {key}.paytable: {exc}") from None
    wager: int | None = None
    if entry.wager is not None:
        try:
            wager = dollars(entry.wager)
        except MoneyError as exc:
            raise SignConfigError(f"{source}: {key}.wager: {exc}") from None
        if wager <= 0 or wager % UNITS_PER_CENT:
            raise SignConfigError(f"{source}: {key}.wager: a wager is a positive whole of cents")
    levels = dict(entry.levels)
    return SourceLook(kind, entry.id, entry.name or "", table, wager, levels, entry.show)


def _logo(source: str, path: Path) -> tuple[bytes, str]:
    kind = LOGO_TYPES.get(path.suffix.lower())
    if kind is None:
        raise SignConfigError(
            f"{source}: sign.logo: {path.name}: not one of {', '.join(sorted(LOGO_TYPES))}"
        )
    try:
        with path.open("rb") as handle:
            data = handle.read(LOGO_BYTES + 1)
    except OSError as exc:
        raise SignConfigError(f"{source}: sign.logo: cannot read {path}: {exc.strerror}") from None
    if len(data) > LOGO_BYTES:
        raise SignConfigError(f"{source}: sign.logo: {path} is larger than 1 MiB")
    return data, kind


def sign_config_from(data: dict[str, Any], source: str = "<memory>") -> SignConfig:
    """Validate a parsed file into a :class:`SignConfig`, or raise :class:`SignConfigError`."""
    try:
        model = _SignFile.model_validate(data).sign
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            why = str(err["msg"]).removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                why = "unknown key"
            elif err["type"] == "missing":
                why = "missing required field"
            lines.append(f"{source}: {_where(tuple(err['loc']))}: {why}")
        raise SignConfigError("\n".join(lines)) from None
    try:
        folder = paytable_dir(model.paytables)
    except PaytableError as exc:
        raise SignConfigError(f"{source}: sign.paytables: {exc}") from None
    if model.paytables is not None and not folder.is_dir():
        raise SignConfigError(f"{source}: sign.paytables: {folder} is not a directory")
    looks: dict[str, SourceLook] = {}
    for kind, entries in (("table", model.tables), ("link", model.links)):
        for index, entry in enumerate(entries):
            look = _look(source, kind, index, entry, folder)  # type: ignore[arg-type]
            looks[f"{kind}/{entry.id}"] = look
    logo, logo_type = _logo(source, model.logo) if model.logo is not None else (b"", "")
    return SignConfig(
        title=model.title or "",
        logo=logo,
        logo_type=logo_type,
        banner_s=model.banner_s,
        odometer_ms=model.odometer_ms,
        colours=Colours(**model.colours.model_dump()),
        sources=looks,
        source=source,
    )


def load_sign_config(path: Path) -> SignConfig:
    """Read and validate a sign file; :class:`SignConfigError` names what is wrong."""
    return sign_config_from(read_toml(path, SignConfigError), str(path))
