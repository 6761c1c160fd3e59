"""Configuration: TOML read with ``tomllib`` (floats as exact Decimals), validated whole.

A bad file, key or value raises :class:`ConfigError` whose message names the file, the key
and the reason; nothing starts until the whole file is valid.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from progressived.config.paytables import PaytableError, find_paytable
from progressived.core.money import MoneyError, dollars, rate
from progressived.core.params import (
    AboveLimit,
    AwardOrder,
    MeterParams,
    ParamsError,
    Policy,
    TableParams,
    seed_conflict,
    validate,
)

Amount = Decimal | int | str


class ConfigError(ValueError):
    """A configuration that cannot run the controller."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TableSection(_Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    seats: int = Field(default=7, ge=1, le=12)
    paytable: str
    paytables: Path | None = None


class MeterSection(_Strict):
    id: str = Field(default="main", pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$")
    seed: Amount = Decimal("1000.00")
    rate: Amount | None = None  # required for a local meter
    # A linked meter names its link; its seed, rates and limit are the link's.
    link: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
    # The link's id for it (``[[link.meters]] id``), when not the table's ``id``.
    link_meter: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$")
    reserve_rate: Amount = Decimal(0)
    limit: Amount | None = None
    above_limit: AboveLimit = AboveLimit.RESERVE
    start: Amount | None = None


class ProgressiveSection(_Strict):
    wager: Amount | None = None
    policy: Policy = Policy.SEQUENTIAL
    award_order: AwardOrder = AwardOrder.COUNTER_CLOCKWISE
    meters: list[MeterSection] = Field(default_factory=lambda: [MeterSection(rate=Decimal(0))])


class ProgressiveConfig(_Strict):
    """The engine's part of the configuration file; other sections belong to adapters."""

    model_config = ConfigDict(extra="allow", frozen=True)

    table: TableSection
    progressive: ProgressiveSection = Field(default_factory=ProgressiveSection)


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out or "(top level)"


def format_validation_error(source: str, exc: ValidationError) -> str:
    """One line per problem: ``file: key: reason``."""
    lines = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = "missing required key"
        elif err["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{source}: {_loc(loc)}: {msg}")
    return "\n".join(lines)


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle, parse_float=Decimal)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def _amount(source: str, key: str, value: Amount | None) -> int | None:
    if value is None:
        return None
    try:
        return dollars(value)
    except MoneyError as exc:
        raise ConfigError(f"{source}: {key}: {exc}") from None


def table_params_from(
    data: Mapping[str, Any], source: str, base_dir: Path | None = None
) -> TableParams:
    """Validate the ``[table]`` and ``[progressive]`` sections into :class:`TableParams`."""
    try:
        model = ProgressiveConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(format_validation_error(source, exc)) from None
    folder = model.table.paytables
    if folder is not None and not folder.is_absolute() and base_dir is not None:
        folder = base_dir / folder
    try:
        paytable = find_paytable(model.table.paytable, folder)
    except PaytableError as exc:
        raise ConfigError(f"{source}: table.paytable: {exc}") from None
    meters = []
    for index, m in enumerate(model.progressive.meters):
        key = f"progressive.meters[{index}]"
        if m.link is not None:
            meters.append(_linked_meter(source, key, m))
            continue
        if m.link_meter is not None:
            raise ConfigError(
                f"{source}: {key}.link_meter: meter {m.id} names no link; link_meter is the "
                "link's id of a linked meter (give `link` too, or leave link_meter out)"
            )
        if m.rate is None:
            raise ConfigError(f"{source}: {key}.rate: missing required key")
        try:
            meter_rate, reserve_rate = rate(m.rate), rate(m.reserve_rate)
        except MoneyError as exc:
            raise ConfigError(f"{source}: {key}: {exc}") from None
        seed = _amount(source, f"{key}.seed", m.seed)
        assert seed is not None
        meters.append(
            MeterParams(
                id=m.id,
                seed=seed,
                rate=meter_rate,
                reserve_rate=reserve_rate,
                limit=_amount(source, f"{key}.limit", m.limit),
                above_limit=m.above_limit,
                start=_amount(source, f"{key}.start", m.start),
            )
        )
    params = TableParams(
        table_id=model.table.id,
        paytable=paytable,
        meters=tuple(meters),
        seats=model.table.seats,
        wager=_amount(source, "progressive.wager", model.progressive.wager),
        policy=model.progressive.policy,
        award_order=model.progressive.award_order,
    )
    try:
        validate(params)
    except ParamsError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    for index, (section, meter) in enumerate(zip(model.progressive.meters, meters, strict=True)):
        if (
            section.link is None
            and "seed" in section.model_fields_set
            and (problem := seed_conflict(params, meter.id, meter.seed))
        ):
            raise ConfigError(f"{source}: progressive.meters[{index}].seed: {problem}")
    return params


_LINK_OWNS = ("seed", "rate", "reserve_rate", "limit", "above_limit", "start")


def _linked_meter(source: str, key: str, section: MeterSection) -> MeterParams:
    """A meter held by a link: only its id and the link's id are the table's to give."""
    for name in _LINK_OWNS:
        if name in section.model_fields_set:
            raise ConfigError(
                f"{source}: {key}.{name}: meter {section.id} is linked to {section.link}; "
                "its seed, rates and limit belong to the link's configuration"
            )
    return MeterParams(id=section.id, link=section.link, link_meter=section.link_meter)


def load_table_params(path: Path) -> TableParams:
    return table_params_from(read_toml(path), str(path), path.parent)


def with_overrides(
    params: TableParams,
    *,
    wager: int | None = None,
    seed: int | None = None,
    meter_start: int | None = None,
    meter_rate: Any = None,
    reserve_rate: Any = None,
    policy: Policy | None = None,
) -> TableParams:
    """Override the first meter's settings (what ``simulate``'s flags change)."""
    first = params.meters[0]
    if seed is not None:
        first = replace(first, seed=seed)
        if problem := seed_conflict(replace(params, wager=wager or params.wager), first.id, seed):
            raise ConfigError(f"--seed: {problem}")
    if meter_start is not None:
        first = replace(first, start=meter_start)
    if meter_rate is not None:
        first = replace(first, rate=rate(meter_rate))
    if reserve_rate is not None:
        first = replace(first, reserve_rate=rate(reserve_rate))
    out = replace(params, meters=(first, *params.meters[1:]))
    if wager is not None:
        out = replace(out, wager=wager)
    if policy is not None:
        out = replace(out, policy=policy)
    try:
        validate(out)
    except ParamsError as exc:
        raise ConfigError(str(exc)) from None
    return out
