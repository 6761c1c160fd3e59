"""The daemon's configuration file, validated completely before anything starts.

Sections: ``[table]`` and ``[progressive]`` (the engine, see :mod:`progressived.config.table`),
``[board]`` (the driver plugin and its own settings), ``[keypad]``, ``[mqtt]``,
``[ledger]``, ``[metrics]``, ``[control]``, ``[log]``, ``[slips]`` (payout slips,
:mod:`progressived.config.slips`) and, for a table with linked meters, ``[link]``. Any
problem raises :class:`~progressived.config.table.ConfigError` naming the file, the key and
the reason.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from progressived.board.driver import DriverSettings
from progressived.config.drivers import DriverNotFound, load_driver_factory
from progressived.config.keypad import KeypadError, KeypadMap, keypad_from_config
from progressived.config.site import SiteSection
from progressived.config.slips import SlipsSection
from progressived.config.table import (
    ConfigError,
    Problems,
    format_validation_error,
    read_toml,
    table_params_from,
    validate_whole,
)
from progressived.core.params import TableParams
from progressived.mqtt.config import MqttSection
from progressived.runtime.config_files import StrictModel


class LedgerSection(StrictModel):
    path: Path = Path("/var/lib/progressived/ledger.db")
    checkpoint_idle_s: float = Field(default=30.0, gt=0, le=3600)
    retry_s: float = Field(default=5.0, gt=0, le=600)


class MetricsSection(StrictModel):
    enabled: bool = True
    address: str = "127.0.0.1"
    port: int = Field(default=9464, ge=0, le=65535)


class ControlSection(StrictModel):
    socket: Path = Path("/run/progressived/control.sock")
    group: str | None = None


class WatchdogSection(StrictModel):
    """When the systemd watchdog stops being pinged (and systemd restarts the daemon)."""

    board_offline_grace_s: float = Field(default=30.0, ge=0, le=3600)
    loop_stall_s: float = Field(default=5.0, gt=0, le=600)


class SelfCheckSection(StrictModel):
    """The approved software digest (``progressived self-check`` prints the installed one)."""

    software_sha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$")


class LogSection(StrictModel):
    format: Literal["auto", "json", "console"] = "auto"
    level: Literal["debug", "info", "warning", "error"] = "info"


class BoardSection(BaseModel):
    """``driver`` picks the plugin; the other keys are the plugin's own settings."""

    model_config = ConfigDict(extra="allow", frozen=True)

    driver: str = "serial"


class LinkSection(StrictModel):
    """The link this table's linked meters belong to (docs/link.md)."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
    missed_heartbeats: int = Field(default=3, ge=1, le=100)
    heartbeat_s: float = Field(default=1.0, gt=0, le=60)
    resend_s: float = Field(default=2.0, gt=0, le=600)


class ArchiveSection(StrictModel):
    """The table's side of the archive (docs/archive.md): its ledger rows are sent to the
    archive after the archived head; past either lag the table is degraded (still playing)."""

    max_lag_rows: int = Field(default=10_000, ge=1, le=10_000_000)
    max_lag_s: float = Field(default=120.0, gt=0, le=86_400 * 7)
    resend_s: float = Field(default=10.0, gt=0, le=600)


class _DaemonModel(StrictModel):
    table: dict[str, Any]
    progressive: dict[str, Any] = Field(default_factory=dict)
    board: BoardSection
    keypad: dict[str, Any] = Field(default_factory=dict)
    mqtt: MqttSection = Field(default_factory=MqttSection)
    ledger: LedgerSection = Field(default_factory=LedgerSection)
    metrics: MetricsSection = Field(default_factory=MetricsSection)
    control: ControlSection = Field(default_factory=ControlSection)
    log: LogSection = Field(default_factory=LogSection)
    watchdog: WatchdogSection = Field(default_factory=WatchdogSection)
    selfcheck: SelfCheckSection = Field(default_factory=SelfCheckSection)
    link: LinkSection | None = None
    archive: ArchiveSection | None = None
    slips: SlipsSection = Field(default_factory=SlipsSection)
    site: SiteSection = Field(default_factory=SiteSection)  # read by the reports only


@dataclass(frozen=True)
class DaemonConfig:
    """Everything the daemon needs, validated."""

    source: Path
    digest: str
    params: TableParams
    driver: str
    board: DriverSettings  # the driver plugin's validated settings
    keypad: KeypadMap
    mqtt: MqttSection
    ledger: LedgerSection
    metrics: MetricsSection
    control: ControlSection
    log: LogSection
    watchdog: WatchdogSection
    selfcheck: SelfCheckSection
    link: LinkSection | None = None
    archive: ArchiveSection | None = None
    slips: SlipsSection = field(default_factory=SlipsSection)


def _check_link(src: str, params: TableParams, link: LinkSection | None) -> None:
    """A linked meter needs the ``[link]`` section, and names the same link."""
    linked = [m for m in params.meters if m.link is not None]
    if link is None:
        if linked:
            raise ConfigError(
                f"{src}: link: meter {linked[0].id} is linked to {linked[0].link}: "
                "a [link] section is needed"
            )
        return
    if not linked:
        raise ConfigError(f"{src}: link: no meter of [[progressive.meters]] names link {link.id}")
    for index, m in enumerate(params.meters):
        if m.link is not None and m.link != link.id:
            raise ConfigError(
                f"{src}: progressive.meters[{index}].link: {m.link} is not the table's link "
                f"{link.id}"
            )


def _prefixed(source: str, section: str, exc: ValidationError) -> str:
    lines = format_validation_error(source, exc).splitlines()
    return "\n".join(line.replace(f"{source}: ", f"{source}: {section}.", 1) for line in lines)


def resolved(source: Path, path: Path) -> Path:
    """A path of the file as used: a relative one is relative to the file's directory."""
    return path if path.is_absolute() else Path(os.path.normpath(source.parent / path))


def daemon_config_from(data: Mapping[str, Any], source: Path, raw: bytes = b"") -> DaemonConfig:
    """The validated configuration; a :class:`ConfigError` lists every problem found."""
    source = Path(os.path.abspath(source))
    src = str(source)
    problems = Problems()
    model = validate_whole(_DaemonModel, data, src, problems)
    params = None
    sections = {"table": data.get("table"), "progressive": data.get("progressive", {})}
    if isinstance(sections["table"], Mapping) and isinstance(sections["progressive"], Mapping):
        with problems.collect():
            params = table_params_from(sections, src, source.parent)
    if model is None:
        problems.raise_any()
        raise ConfigError(f"{src}: (top level): not a valid configuration")
    with problems.collect():
        if params is not None:
            _check_link(src, params, model.link)
    board = None
    with problems.collect():
        board = _board(src, model.board)
    seats = board.seats if board is not None else None
    if params is not None and seats is not None and seats < params.seats:
        problems.add(
                f"{src}: board.seats: the board has {board.seats} seats, the table {params.seats}"
            )
    keypad = None
    with problems.collect():
        keypad = _keypad(src, model.keypad, params)
    mqtt = resolve_mqtt_paths(source, model.mqtt)
    with problems.collect():
        check_password_file(src, mqtt)
    problems.raise_any()
    assert params is not None
    assert board is not None
    assert keypad is not None
    return DaemonConfig(
        source=source,
        digest=hashlib.sha256(raw).hexdigest() if raw else "",
        params=params,
        driver=model.board.driver,
        board=board,
        keypad=keypad,
        mqtt=mqtt,
        ledger=model.ledger.model_copy(update={"path": resolved(source, model.ledger.path)}),
        metrics=model.metrics,
        control=model.control.model_copy(update={"socket": resolved(source, model.control.socket)}),
        log=model.log,
        watchdog=model.watchdog,
        selfcheck=model.selfcheck,
        link=model.link,
        archive=model.archive,
        slips=model.slips,
    )


def _board(src: str, section: BoardSection) -> DriverSettings:
    """The driver plugin's own validation of its ``[board]`` keys."""
    try:
        factory = load_driver_factory(section.driver)
    except DriverNotFound as exc:
        raise ConfigError(f"{src}: board.driver: {exc}") from None
    try:
        return factory.validate(dict(section.model_extra or {}))
    except ValidationError as exc:
        raise ConfigError(_prefixed(src, "board", exc)) from None
    except ValueError as exc:
        raise ConfigError(f"{src}: board: {exc}") from None


def _keypad(src: str, section: Mapping[str, Any], params: TableParams | None) -> KeypadMap:
    """The ``[keypad]`` codes, and (with valid table parameters) a code for every hand."""
    try:
        keypad = keypad_from_config({"keypad": section}, src)
        if params is not None:
            keypad.hand_codes(params.paytable.hand_ids)
    except (KeypadError, ConfigError) as exc:
        message = str(exc)
        if not message.startswith(src):
            message = f"{src}: keypad: {message}"
        raise ConfigError(message) from None
    return keypad


def resolve_mqtt_paths(source: Path, mqtt: MqttSection) -> MqttSection:
    """``password_file`` and the TLS files relative to the configuration file."""
    update: dict[str, Any] = {}
    if mqtt.password_file is not None:
        update["password_file"] = resolved(source, mqtt.password_file)
    if mqtt.tls is not None:
        tls = {
            name: resolved(source, value)
            for name in ("ca_certs", "certfile", "keyfile")
            if (value := getattr(mqtt.tls, name)) is not None
        }
        update["tls"] = mqtt.tls.model_copy(update=tls)
    return mqtt.model_copy(update=update) if update else mqtt


def check_password_file(src: str, mqtt: MqttSection) -> None:
    if mqtt.password_file is not None and not mqtt.password_file.is_file():
        raise ConfigError(f"{src}: mqtt.password_file: no such file {mqtt.password_file}")


def load_daemon_config(path: Path) -> DaemonConfig:
    """Read and validate the whole configuration file."""
    path = Path(os.path.abspath(path))
    data = read_toml(path)
    return daemon_config_from(data, path, path.read_bytes())
