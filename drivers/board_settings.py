"""The ``[board]`` settings of the serial driver (docs/protocol.md, "The driver")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from drivers import protocol as p
from progressived.config import ConfigError, format_validation_error


class BoardSettings(BaseModel):
    """The ``[board]`` section of the controller configuration."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    port: str = Field(min_length=1)
    baudrate: int = Field(default=115200, gt=0)
    heartbeat_interval_s: float = Field(default=1.0, ge=0.01, le=60.0)
    missed_heartbeats: int = Field(default=3, ge=1, le=100)
    reconnect_initial_s: float = Field(default=0.5, gt=0, le=60.0)
    reconnect_max_s: float = Field(default=10.0, gt=0, le=600.0)
    seats: int | None = Field(default=None, ge=1, le=p.MAX_SEATS)
    exclusive: bool = True  # flock the port: a second process cannot open it too


class _BoardSection(BaseModel):
    model_config = ConfigDict(extra="allow")

    board: BoardSettings


def board_settings_from_config(data: Mapping[str, Any], source: str = "<memory>") -> BoardSettings:
    """The ``[board]`` section of a configuration mapping; ConfigError names file and key."""
    try:
        return _BoardSection.model_validate(dict(data)).board
    except ValidationError as exc:
        raise ConfigError(format_validation_error(source, exc)) from None
