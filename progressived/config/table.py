"""Configuration: TOML read by :mod:`progressived.runtime.config_files` (floats as exact
Decimals), validated whole.

A bad file, key or value raises :class:`ConfigError` whose message names the file, the key
and the reason; nothing starts until the whole file is valid.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from copy import deepcopy as copy_deep
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar, get_args

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
from progressived.runtime import config_files
from progressived.runtime.config_files import StrictModel

Amount = Decimal | int | str


class ConfigError(ValueError):
    """A configuration that cannot run the controller: every problem found, one a line
    (``FILE: key: reason``), so that one run of ``check-config`` shows them all."""

    def __init__(self, *problems: str) -> None:
        self.problems = tuple(line for p in problems for line in str(p).splitlines() if line)
        super().__init__("\n".join(self.problems))


class Problems:
    """Collects a file's problems across independent checks (:meth:`collect`), so that a
    file with several errors is reported whole instead of one error per run."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, *lines: str) -> None:
        for line in ConfigError(*lines).problems:
            if line not in self.lines:
                self.lines.append(line)

    @contextmanager
    def collect(self) -> Iterator[None]:
        """Run a check; a :class:`ConfigError` it raises is recorded, not propagated."""
        try:
            yield
        except ConfigError as exc:
            self.add(*exc.problems)

    def raise_any(self) -> None:
        if self.lines:
            raise ConfigError(*self.lines)


class TableSection(StrictModel):
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    seats: int = Field(default=7, ge=1, le=12)
    paytable: str
    paytables: Path | None = None


class MeterSection(StrictModel):
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


class ProgressiveSection(StrictModel):
    wager: Amount | None = None
    policy: Policy = Policy.SEQUENTIAL
    award_order: AwardOrder = AwardOrder.COUNTER_CLOCKWISE
    meters: list[MeterSection] = Field(default_factory=lambda: [MeterSection(rate=Decimal(0))])


class ProgressiveConfig(StrictModel):
    """The engine's part of the configuration file; other sections belong to adapters."""

    model_config = ConfigDict(extra="allow", frozen=True)

    table: TableSection
    progressive: ProgressiveSection = Field(default_factory=ProgressiveSection)


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out or "(top level)"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (through ``X | None``, ``list[X]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None


def known_keys(model: type[BaseModel] | None, loc: tuple[int | str, ...]) -> list[str]:
    """The keys ``model`` allows at ``loc`` (a section or a table inside one)."""
    current = model
    for part in loc:
        if isinstance(part, int):
            continue
        if current is None or part not in current.model_fields:
            return []
        current = _model_in(current.model_fields[part].annotation)
    return list(current.model_fields) if current is not None else []


def did_you_mean(key: str, known: list[str]) -> str:
    """`` (did you mean 'port'?)`` for a misspelt key, or nothing."""
    near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


def format_validation_error(
    source: str, exc: ValidationError, model: type[BaseModel] | None = None
) -> str:
    """One line per problem: ``file: key: reason``; an unknown key of ``model`` gets the
    nearest known key as a suggestion."""
    lines = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = "missing required key"
        elif err["type"] == "extra_forbidden":
            msg = "unknown key"
            if loc and isinstance(loc[-1], str):
                msg += did_you_mean(loc[-1], known_keys(model, loc[:-1]))
        lines.append(f"{source}: {_loc(loc)}: {msg}")
    return "\n".join(lines)


M = TypeVar("M", bound=BaseModel)


def validate_whole(
    model: type[M], data: Mapping[str, Any], source: str, problems: Problems
) -> M | None:
    """``model`` over ``data``, every problem recorded (an unknown key with a "did you
    mean"). Then, so that the checks needing a valid model still run and report theirs,
    the model again without the offending keys (defaults in their place); None if that
    fails too (a required key was at fault)."""
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        problems.add(format_validation_error(source, exc, model))
        pruned = _without(data, [err["loc"] for err in exc.errors()])
    try:
        return model.model_validate(pruned)
    except ValidationError:
        return None


def _without(data: Mapping[str, Any], locs: list[tuple[int | str, ...]]) -> dict[str, Any]:
    """A deep copy of ``data`` without the keys at ``locs`` (a list item's key inside it)."""
    pruned: dict[str, Any] = copy_deep(dict(data))
    for loc in locs:
        parent: Any = pruned
        for part in loc[:-1]:
            parent = _child(parent, part)
        if isinstance(parent, dict) and loc and loc[-1] in parent:
            del parent[loc[-1]]
    return pruned


def _child(parent: Any, part: int | str) -> Any:
    if isinstance(parent, dict):
        return parent.get(part)
    if isinstance(parent, list) and isinstance(part, int) and 0 <= part < len(parent):
        return parent[part]
    return None


def read_toml(path: Path) -> dict[str, Any]:
    """A configuration file (:func:`progressived.runtime.config_files.read_toml`), its faults
    as :class:`ConfigError`."""
    return config_files.read_toml(path, ConfigError)


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
    """Validate the ``[table]`` and ``[progressive]`` sections into :class:`TableParams`.

    Every problem of the two sections is raised at once (one :class:`ConfigError`); the
    checks of the whole (the engine's :func:`validate`, a seed against the paytable) run
    once each part is valid.
    """
    problems = Problems()
    model = validate_whole(ProgressiveConfig, data, source, problems)
    if model is None:
        problems.raise_any()
        raise ConfigError(f"{source}: table: not a valid [table] section")
    folder = model.table.paytables
    if folder is not None and not folder.is_absolute() and base_dir is not None:
        folder = base_dir / folder
    paytable = None
    try:
        paytable = find_paytable(model.table.paytable, folder)
    except PaytableError as exc:
        problems.add(f"{source}: table.paytable: {exc}")
    meters = []
    for index, m in enumerate(model.progressive.meters):
        with problems.collect():
            meters.append(_meter(source, index, m))
    wager = None
    with problems.collect():
        wager = _amount(source, "progressive.wager", model.progressive.wager)
    problems.raise_any()
    assert paytable is not None
    params = TableParams(
        table_id=model.table.id,
        paytable=paytable,
        meters=tuple(meters),
        seats=model.table.seats,
        wager=wager,
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
            problems.add(f"{source}: progressive.meters[{index}].seed: {problem}")
    problems.raise_any()
    return params


def _meter(source: str, index: int, m: MeterSection) -> MeterParams:
    """One ``[[progressive.meters]]`` entry; its problems together in one ConfigError."""
    key = f"progressive.meters[{index}]"
    if m.link is not None:
        return _linked_meter(source, key, m)
    problems = Problems()
    if m.link_meter is not None:
        problems.add(
            f"{source}: {key}.link_meter: meter {m.id} names no link; link_meter is the "
            "link's id of a linked meter (give `link` too, or leave link_meter out)"
        )
    if m.rate is None:
        problems.add(f"{source}: {key}.rate: missing required key")
    rates: dict[str, Any] = {}
    for name in ("rate", "reserve_rate"):
        try:
            rates[name] = None if getattr(m, name) is None else rate(getattr(m, name))
        except MoneyError as exc:
            problems.add(f"{source}: {key}: {exc}")
    amounts: dict[str, int | None] = {}
    for name in ("seed", "limit", "start"):
        with problems.collect():
            amounts[name] = _amount(source, f"{key}.{name}", getattr(m, name))
    problems.raise_any()
    seed, meter_rate, reserve_rate = amounts["seed"], rates["rate"], rates["reserve_rate"]
    assert seed is not None
    assert meter_rate is not None
    return MeterParams(
        id=m.id,
        seed=seed,
        rate=meter_rate,
        reserve_rate=reserve_rate,
        limit=amounts["limit"],
        above_limit=m.above_limit,
        start=amounts["start"],
    )


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
