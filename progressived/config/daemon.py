"""The daemon's configuration file, validated completely before anything starts.

Sections: ``[table]`` and ``[progressive]`` (the engine, see :mod:`progressived.config.table`),
``[board]`` (the driver plugin and its own settings), ``[keypad]``, ``[mqtt]``,
``[ledger]``, ``[metrics]``, ``[control]``, ``[log]`` and, for a table with linked meters,
``[link]``. Any problem raises
:class:`~progressived.config.table.ConfigError` naming the file, the key and the reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from progressived.board.driver import DriverSettings
from progressived.config.drivers import DriverNotFound, load_driver_factory
from progressived.config.keypad import KeypadError, KeypadMap, keypad_from_config
from progressived.config.table import (
    ConfigError,
    format_validation_error,
    read_toml,
    table_params_from,
)
from progressived.core.params import TableParams
from progressived.mqtt.config import MqttSection


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LedgerSection(_Strict):
    path: Path = Path("/var/lib/progressived/ledger.db")
    checkpoint_idle_s: float = Field(default=30.0, gt=0, le=3600)
    retry_s: float = Field(default=5.0, gt=0, le=600)


class MetricsSection(_Strict):
    enabled: bool = True
    address: str = "127.0.0.1"
    port: int = Field(default=9464, ge=0, le=65535)


class ControlSection(_Strict):
    socket: Path = Path("/run/progressived/control.sock")
    group: str | None = None


class WatchdogSection(_Strict):
    """When the systemd watchdog stops being pinged (and systemd restarts the daemon)."""

    board_offline_grace_s: float = Field(default=30.0, ge=0, le=3600)
    loop_stall_s: float = Field(default=5.0, gt=0, le=600)


class SelfCheckSection(_Strict):
    """The approved software digest (``progressived self-check`` prints the installed one)."""

    software_sha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$")


class LogSection(_Strict):
    format: Literal["auto", "json", "console"] = "auto"
    level: Literal["debug", "info", "warning", "error"] = "info"


class BoardSection(BaseModel):
    """``driver`` picks the plugin; the other keys are the plugin's own settings."""

    model_config = ConfigDict(extra="allow", frozen=True)

    driver: str = "serial"


class LinkSection(_Strict):
    """The link this table's linked meters belong to (issue 13; docs/link.md)."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
    missed_heartbeats: int = Field(default=3, ge=1, le=100)
    heartbeat_s: float = Field(default=1.0, gt=0, le=60)
    resend_s: float = Field(default=2.0, gt=0, le=600)


class _DaemonModel(_Strict):
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


def daemon_config_from(data: Mapping[str, Any], source: Path, raw: bytes = b"") -> DaemonConfig:
    src = str(source)
    try:
        model = _DaemonModel.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(format_validation_error(src, exc)) from None
    params = table_params_from(
        {"table": model.table, "progressive": model.progressive}, src, source.parent
    )
    _check_link(src, params, model.link)
    try:
        factory = load_driver_factory(model.board.driver)
    except DriverNotFound as exc:
        raise ConfigError(f"{src}: board.driver: {exc}") from None
    extra = dict(model.board.model_extra or {})
    try:
        board = factory.validate(extra)
    except ValidationError as exc:
        raise ConfigError(_prefixed(src, "board", exc)) from None
    except ValueError as exc:
        raise ConfigError(f"{src}: board: {exc}") from None
    board_seats = board.seats
    if board_seats is not None and board_seats < params.seats:
        raise ConfigError(
            f"{src}: board.seats: the board has {board_seats} seats, the table {params.seats}"
        )
    try:
        keypad = keypad_from_config({"keypad": model.keypad}, src)
        keypad.hand_codes(params.paytable.hand_ids)
    except (KeypadError, ConfigError) as exc:
        message = str(exc)
        if not message.startswith(src):
            message = f"{src}: keypad: {message}"
        raise ConfigError(message) from None
    if model.mqtt.password_file is not None and not model.mqtt.password_file.is_file():
        raise ConfigError(f"{src}: mqtt.password_file: no such file {model.mqtt.password_file}")
    ledger = model.ledger
    if not ledger.path.is_absolute():
        ledger = LedgerSection(
            path=source.parent / ledger.path,
            checkpoint_idle_s=ledger.checkpoint_idle_s,
            retry_s=ledger.retry_s,
        )
    return DaemonConfig(
        source=source,
        digest=hashlib.sha256(raw).hexdigest() if raw else "",
        params=params,
        driver=model.board.driver,
        board=board,
        keypad=keypad,
        mqtt=model.mqtt,
        ledger=ledger,
        metrics=model.metrics,
        control=model.control,
        log=model.log,
        watchdog=model.watchdog,
        selfcheck=model.selfcheck,
        link=model.link,
    )


def load_daemon_config(path: Path) -> DaemonConfig:
    """Read and validate the whole configuration file."""
    data = read_toml(path)
    return daemon_config_from(data, path, path.read_bytes())
