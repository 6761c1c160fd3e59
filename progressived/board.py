"""The board driver interface: the one small contract between the daemon and table hardware.

Drivers live in the ``drivers`` package (or any other distribution) and register a factory
under the ``progressived.drivers`` entry-point group; the daemon finds them by name, so
``progressived`` never imports a driver. Events flow in, light commands flow out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from progressived.engine.state import Light

ENTRY_POINT_GROUP = "progressived.drivers"


@dataclass(frozen=True, slots=True)
class SensorsReported:
    """The board's full sensor state: the seats holding a wager."""

    present: frozenset[int]
    board_seq: int = 0


@dataclass(frozen=True, slots=True)
class KeyPressed:
    """A keypad key, with the board's key sequence number.

    ``idempotency_key`` identifies the press across retransmissions and reconnects, so a
    press is applied once.
    """

    code: str
    key_seq: int
    board_id: str
    idempotency_key: str = ""


@dataclass(frozen=True, slots=True)
class SupervisorKey:
    """The supervisor's key switch (or button) turned on or off."""

    on: bool


@dataclass(frozen=True, slots=True)
class BoardOnline:
    board_id: str
    protocol_version: int


@dataclass(frozen=True, slots=True)
class BoardOffline:
    reason: str


BoardEvent = SensorsReported | KeyPressed | SupervisorKey | BoardOnline | BoardOffline


@runtime_checkable
class BoardDriver(Protocol):
    """What the daemon needs from a table board driver."""

    async def run(self) -> None:
        """Connect, reconnect with backoff, until :meth:`stop`; never raises on bad input."""

    async def next_event(self) -> BoardEvent:
        """The next event from the board (waits)."""

    async def set_lights(self, lights: Mapping[int, Light]) -> None:
        """Show these lights (seat -> light)."""

    async def stop(self) -> None: ...

    @property
    def counters(self) -> Mapping[str, int]:
        """Frame counters: good frames, CRC errors, resyncs, duplicates, reconnects, ..."""

    @property
    def online(self) -> bool: ...


class DriverFactory(Protocol):
    """A plugin: validates its own settings (raising ``ValueError`` naming the key), builds a driver."""

    def validate(self, settings: Mapping[str, Any]) -> Any: ...

    def create(self, settings: Any) -> BoardDriver: ...


class DriverNotFound(LookupError):
    pass


def available_drivers() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def load_driver_factory(name: str) -> DriverFactory:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            factory: DriverFactory = ep.load()
            return factory
    known = ", ".join(available_drivers()) or "none installed"
    raise DriverNotFound(f"no board driver named {name!r} (available: {known})")
