"""The archive's configuration file: ``[archive]``, ``[database]``, ``[mqtt]``, ``[metrics]``,
``[log]`` (docs/archive.md, "Running it"; example ``config/archive.toml``).

Validated whole and strictly (unknown keys are errors); any problem raises
:class:`~progressived.config.table.ConfigError` naming the file, the key and the reason.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from progressived.config.daemon import (
    LogSection,
    MetricsSection,
    check_password_file,
    resolve_mqtt_paths,
    resolved,
)
from progressived.config.table import ConfigError, Problems, read_toml, validate_whole
from progressived.mqtt.config import MqttSection
from progressived.runtime.config_files import StrictModel
from progressived.storage.errors import LedgerUnavailable
from progressived.storage.location import has_password, is_url

_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class ArchiveSection(StrictModel):
    """Who the archive is (its MQTT user name by default) and whose rows it takes."""

    id: str = Field(default="archive", pattern=_ID)
    tables: list[str] = Field(min_length=1, max_length=10_000)
    batch_max: int = Field(default=256, ge=1, le=10_000)  # messages per transaction
    lane_max: int = Field(default=32, ge=1, le=1_000)  # messages waiting per table


class DatabaseSection(StrictModel):
    """The archive's database: a PostgreSQL URL without a password (``password_file``, or
    libpq's ``PGPASSFILE`` / ``~/.pgpass``), written under a lease of ``lease_s`` held as
    ``holder`` (default: this host's name)."""

    url: str = Field(min_length=1, max_length=2000)
    password_file: Path | None = None
    lease_s: float = Field(default=20.0, ge=1, le=300)
    holder: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")

    @model_validator(mode="after")
    def _url(self) -> DatabaseSection:
        if not is_url(self.url):
            raise ValueError("url must be a postgresql:// URL")
        if has_password(self.url):
            raise ValueError("url holds a password: put it in password_file or PGPASSFILE")
        return self

    def lease_holder(self) -> str:
        return self.holder or socket.gethostname()

    def password(self) -> str | None:
        if self.password_file is None:
            return None
        try:
            lines = self.password_file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise LedgerUnavailable(
                f"database.password_file: cannot read {self.password_file}: {exc}"
            ) from None
        return lines[0].strip() if lines else ""


class ArchiveMetricsSection(MetricsSection):
    port: int = Field(default=9466, ge=0, le=65535)


class _Model(StrictModel):
    archive: ArchiveSection
    database: DatabaseSection
    mqtt: MqttSection = Field(default_factory=MqttSection)
    metrics: ArchiveMetricsSection = Field(default_factory=ArchiveMetricsSection)
    log: LogSection = Field(default_factory=LogSection)


@dataclass(frozen=True)
class ArchiveConfig:
    source: Path
    archive: ArchiveSection
    database: DatabaseSection
    mqtt: MqttSection
    metrics: MetricsSection
    log: LogSection


def load_archive_config(path: Path) -> ArchiveConfig:
    """Read and validate an archive's file; :class:`ConfigError` lists every problem."""
    source = Path(os.path.abspath(path))
    return archive_config_from(read_toml(source), source)


def archive_config_from(data: Mapping[str, Any], source: Path) -> ArchiveConfig:
    """The validated archive configuration of ``data`` (read from ``source``)."""
    src = str(source)
    problems = Problems()
    model = validate_whole(_Model, data, src, problems)
    if model is None:
        problems.raise_any()
        raise ConfigError(f"{src}: (top level): not a valid archive configuration")
    for index, table in enumerate(model.archive.tables):
        if re.fullmatch(_ID, table) is None:
            problems.add(f"{src}: archive.tables[{index}]: {table!r} is not a table id")
    if len(set(model.archive.tables)) != len(model.archive.tables):
        problems.add(f"{src}: archive.tables: a table is listed twice")
    mqtt = resolve_mqtt_paths(source, model.mqtt)
    with problems.collect():
        check_password_file(src, mqtt)
    database = model.database
    if database.password_file is not None:
        secret = resolved(source, database.password_file)
        if not secret.is_file():
            problems.add(f"{src}: database.password_file: no such file {secret}")
        database = database.model_copy(update={"password_file": secret})
    problems.raise_any()
    return ArchiveConfig(
        source=source,
        archive=model.archive,
        database=database,
        mqtt=mqtt,
        metrics=model.metrics,
        log=model.log,
    )
