"""The ``[board]`` settings of the serial driver, its counter names and the light codes
(docs/protocol.md, "The driver")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from progressived.board.lights import Light
from progressived.config.table import ConfigError, format_validation_error
from progressived.runtime.config_files import StrictModel
from progressived_drivers import protocol as p


class BoardSettings(StrictModel):
    """The ``[board]`` section of the controller configuration."""

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


DRIVER_COUNTERS = (
    "duplicates",  # a frame whose sequence number was already accepted
    "reordered",  # a frame older than one already accepted (dropped: state is newer)
    "gaps",  # frames never received (sequence numbers skipped)
    "bad_payload",  # CRC good but the message is not valid
    "wrong_direction",  # a controller frame received (echo on the line)
    "unexpected",  # a frame before the board's hello
    "duplicate_keys",  # a retransmitted key press (applied once)
    "keys_out_of_order",  # a key press ahead of the next expected one (board resends)
    "keys",  # key presses delivered
    "heartbeats",  # board heartbeats received
    "states",  # board state reports received
    "acks",  # acknowledgements received
    "board_errors",  # error reports from the board
    "hellos",  # board hellos accepted
    "online_events",
    "offline_events",
    "missed_heartbeat_offline",  # offline because the board went silent
    "reboots",  # the board came back with a new boot id
    "connects",  # port opened
    "reconnects",  # port reopened after losing it
    "connect_failures",  # port could not be opened
    "frames_sent",
    "lights_sent",
    "lights_acked",
    "internal_errors",  # a bug caught (logged) instead of crashing the driver
    "controller_hellos",  # C_HELLO frames sent
    "resync_hellos",  # C_HELLO sent because the board stopped acknowledging lights
    "wire_errors_logged",  # wire errors written to the log (the rest: rate-limited)
    "wire_errors_suppressed",  # wire errors only counted because of the rate limit
    "too_few_seats",  # HELLOs refused: the board has fewer seats than the table
    "wagers_beyond_table",  # STATEs with a wager on a seat beyond the table (seat ignored)
    "stall_lights",  # LIGHTS resent because the controller had been silent (a stall)
)


def light_codes(lights: Mapping[int, Light], seats: int) -> tuple[p.LightCode, ...]:
    """The wire codes for seats 1..seats (a seat not in ``lights`` shows idle)."""
    for seat in lights:
        if not 1 <= seat <= p.MAX_SEATS:
            raise ValueError(f"seat {seat} outside 1..{p.MAX_SEATS}")
    return tuple(p.LightCode[Light(lights.get(s, Light.IDLE)).name] for s in range(1, seats + 1))
