"""The link controller's configuration file: ``[link]``, ``[[link.meters]]`` and the daemon's
``[mqtt]``, ``[ledger]``, ``[metrics]``, ``[control]``, ``[log]``, ``[selfcheck]`` sections.

Each linked meter names a paytable: the hands it pays and their fractions of the meter,
the wager base and the seed come from that file (its ``seed_rule`` is cited when a
configured seed contradicts it). Validated whole, strictly (unknown keys are errors), then
by :func:`progressived.link.core.params.validate`; any problem raises
:class:`~progressived.config.table.ConfigError` naming the file, the key and the reason.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from progressived.config.daemon import (
    ControlSection,
    LedgerSection,
    LogSection,
    MetricsSection,
    SelfCheckSection,
    check_password_file,
    resolve_mqtt_paths,
    resolved,
)
from progressived.config.paytables import Paytable, PaytableError, find_paytable
from progressived.config.site import SiteSection
from progressived.config.table import ConfigError, Problems, read_toml, validate_whole
from progressived.core.money import MoneyError, dollars, rate
from progressived.core.params import AboveLimit, Policy
from progressived.ledger.errors import LedgerUnavailable
from progressived.link.core import params as lp
from progressived.mqtt.config import MqttSection
from progressived.runtime.config_files import PasswordFileError, StrictModel, read_password_file
from progressived.storage.location import has_password, is_url

Amount = Decimal | int | str
_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class LinkMeterSection(StrictModel):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$")
    paytable: str
    rate: Amount
    reserve_rate: Amount = Decimal(0)
    seed: Amount | None = None
    limit: Amount | None = None
    above_limit: AboveLimit = AboveLimit.RESERVE
    wager: Amount | None = None


class LinkDefinitionSection(StrictModel):
    id: str = Field(pattern=_ID)
    tables: list[str] = Field(min_length=1)
    policy: Policy = Policy.SEQUENTIAL
    split_window_ms: int = Field(default=2000, ge=0, le=600_000)
    heartbeat_s: float = Field(default=1.0, gt=0, le=60)
    keep_results: int = Field(default=256, ge=1, le=1_000_000)
    batch_max: int = Field(default=1024, ge=1, le=100_000)
    paytables: Path | None = None
    meters: list[LinkMeterSection] = Field(min_length=1)


class LinkMetricsSection(MetricsSection):
    """The link's defaults differ from a table's, so both can run on one machine."""

    port: int = Field(default=9465, ge=0, le=65535)


class LinkLedgerSection(LedgerSection):
    """The link ledger: a file (``path``, the default) or a PostgreSQL database (``url``),
    exactly one. A URL carries no password: ``password_file`` (the password alone), or
    libpq's ``PGPASSFILE`` / ``~/.pgpass``. In a database the controller writes under a
    lease of ``lease_s`` seconds (docs/link.md)."""

    path: Path = Path("/var/lib/progressived-link/link.db")
    url: str | None = Field(default=None, min_length=1, max_length=2000)
    password_file: Path | None = None
    lease_s: float = Field(default=10.0, ge=1, le=300)
    holder: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")

    @model_validator(mode="after")
    def _one_place(self) -> LinkLedgerSection:
        if self.url is None:
            if self.password_file is not None or self.holder is not None:
                raise ValueError("password_file and holder are for a ledger in a database (url)")
            return self
        if "path" in self.model_fields_set:
            raise ValueError("give path (a file) or url (PostgreSQL), not both")
        if not is_url(self.url):
            raise ValueError("url must be a postgresql:// URL")
        if has_password(self.url):
            raise ValueError(
                "url holds a password: put it in password_file or PGPASSFILE, never in the "
                "configuration file"
            )
        return self

    def lease_holder(self) -> str | None:
        """The name this controller holds the lease under: ``holder``, else this host's
        name; None for a file (no lease)."""
        if self.url is None:
            return None
        return self.holder or socket.gethostname()

    @property
    def location(self) -> Path | str:
        """Where the ledger is: the URL when there is one, else the file."""
        return self.path if self.url is None else self.url

    def password(self) -> str | None:
        """The database password from ``password_file`` (docs/configuration.md, "Password
        files"), if one is named."""
        if self.password_file is None:
            return None
        try:
            return read_password_file(self.password_file)
        except PasswordFileError as exc:
            raise LedgerUnavailable(f"ledger.password_file: {exc}") from None


class LinkControlSection(ControlSection):
    socket: Path = Path("/run/progressived-link/control.sock")


class _LinkModel(StrictModel):
    link: LinkDefinitionSection
    mqtt: MqttSection = Field(default_factory=MqttSection)
    ledger: LinkLedgerSection = Field(default_factory=LinkLedgerSection)
    metrics: LinkMetricsSection = Field(default_factory=LinkMetricsSection)
    control: LinkControlSection = Field(default_factory=LinkControlSection)
    log: LogSection = Field(default_factory=LogSection)
    selfcheck: SelfCheckSection = Field(default_factory=SelfCheckSection)
    site: SiteSection = Field(default_factory=SiteSection)  # read by the reports only


@dataclass(frozen=True)
class LinkConfig:
    """Everything the link controller needs, validated."""

    source: Path
    digest: str
    params: lp.LinkParams
    heartbeat_s: float
    batch_max: int
    paytables: tuple[Path, ...]  # the paytable files the meters cite (for the self-check)
    mqtt: MqttSection
    ledger: LinkLedgerSection
    metrics: MetricsSection
    control: ControlSection
    log: LogSection
    selfcheck: SelfCheckSection


def is_link_config(data: Mapping[str, Any]) -> bool:
    """A file with a ``[link]`` section and no ``[table]`` is a link controller's."""
    return "link" in data and "table" not in data


def _money(source: str, key: str, value: Amount) -> int:
    try:
        return dollars(value)
    except MoneyError as exc:
        raise ConfigError(f"{source}: {key}: {exc}") from None


def _hands(paytable: Paytable) -> dict[str, Any]:
    """The paytable's hands paid as a fraction of a meter (PMG: royal 1, straight 1/10)."""
    return {r.hand.value: r.pay.percent for r in paytable.hands if r.pay.from_meter}


def _meter(source: str, index: int, m: LinkMeterSection, folder: Path | None) -> lp.MeterSpec:
    key = f"link.meters[{index}]"
    try:
        paytable = find_paytable(m.paytable, folder)
    except PaytableError as exc:
        raise ConfigError(f"{source}: {key}.paytable: {exc}") from None
    hands = _hands(paytable)
    if not hands:
        raise ConfigError(
            f"{source}: {key}.paytable: paytable {paytable.id} pays no hand from a meter"
        )
    wager = paytable.wager if m.wager is None else _money(source, f"{key}.wager", m.wager)
    if paytable.seed is not None:
        scaled = paytable.seed * wager // paytable.wager
        seed = scaled if m.seed is None else _money(source, f"{key}.seed", m.seed)
        if seed != scaled:
            raise ConfigError(
                f"{source}: {key}.seed: {m.seed} differs from the seed paytable {paytable.id} "
                f"requires at this wager ({paytable.seed_rule}); leave it out or set it to that"
            )
    elif m.seed is None:
        raise ConfigError(f"{source}: {key}.seed: paytable {paytable.id} states no seed; give one")
    else:
        seed = _money(source, f"{key}.seed", m.seed)
    try:
        meter_rate, reserve_rate = rate(m.rate), rate(m.reserve_rate)
    except MoneyError as exc:
        raise ConfigError(f"{source}: {key}: {exc}") from None
    return lp.MeterSpec(
        m.id,
        seed=seed,
        rate=meter_rate,
        reserve_rate=reserve_rate,
        limit=None if m.limit is None else _money(source, f"{key}.limit", m.limit),
        above_limit=m.above_limit,
        wager_base=wager,
        hands=hands,
    )


def link_config_from(data: Mapping[str, Any], source: Path, raw: bytes = b"") -> LinkConfig:
    """The validated link configuration; a :class:`ConfigError` lists every problem found."""
    source = Path(os.path.abspath(source))
    src = str(source)
    problems = Problems()
    model = validate_whole(_LinkModel, data, src, problems)
    if model is None:
        problems.raise_any()
        raise ConfigError(f"{src}: (top level): not a valid configuration")
    link = model.link
    folder = link.paytables
    if folder is not None and not folder.is_absolute():
        folder = source.parent / folder
    for index, table in enumerate(link.tables):
        if re.fullmatch(_ID, table) is None:
            problems.add(f"{src}: link.tables[{index}]: {table!r} is not a table id")
    if len(set(link.tables)) != len(link.tables):
        problems.add(f"{src}: link.tables: a table is listed twice")
    meters = []
    for i, m in enumerate(link.meters):
        with problems.collect():
            meters.append(_meter(src, i, m, folder))
    mqtt = resolve_mqtt_paths(source, model.mqtt)
    with problems.collect():
        check_password_file(src, mqtt)
    problems.raise_any()
    params = lp.LinkParams(
        link.id,
        tuple(meters),
        frozenset(link.tables),
        policy=link.policy,
        split_window_ms=link.split_window_ms,
        keep_results=link.keep_results,
    )
    try:
        lp.validate(params)
    except lp.LinkParamsError as exc:
        raise ConfigError(f"{src}: {exc}") from None
    ledger = model.ledger.model_copy(update={"path": resolved(source, model.ledger.path)})
    if ledger.password_file is not None:
        secret = resolved(source, ledger.password_file)
        if not secret.is_file():
            raise ConfigError(f"{src}: ledger.password_file: no such file {secret}")
        ledger = ledger.model_copy(update={"password_file": secret})
    cited = {Path(find_paytable(m.paytable, folder).source) for m in link.meters}
    return LinkConfig(
        source=source,
        digest=hashlib.sha256(raw).hexdigest() if raw else "",
        params=params,
        heartbeat_s=link.heartbeat_s,
        batch_max=link.batch_max,
        paytables=tuple(sorted(p for p in cited if p.is_file())),
        mqtt=mqtt,
        ledger=ledger,
        metrics=model.metrics,
        control=model.control.model_copy(update={"socket": resolved(source, model.control.socket)}),
        log=model.log,
        selfcheck=model.selfcheck,
    )


def load_link_config(path: Path) -> LinkConfig:
    """Read and validate a link controller's configuration file."""
    path = Path(os.path.abspath(path))
    data = read_toml(path)
    if "link" not in data:
        raise ConfigError(f"{path}: link: missing required section [link]")
    return link_config_from(data, path, path.read_bytes())
