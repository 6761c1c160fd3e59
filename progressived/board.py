"""The board driver interface: the one small contract between the daemon and table hardware.

A driver turns a table sensor board into a stream of :data:`BoardEvent` and takes the
lights to show. Consume events with ``await driver.next_event()`` (one consumer). Until a
:class:`BoardOnline` arrives the board is offline: no sensor or key input is available.

Drivers live in the ``drivers`` package (or any other distribution) and register a factory
under the ``progressived.drivers`` entry-point group; the daemon finds them by name, so
``progressived`` never imports a driver. Events flow in, light commands flow out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from progressived.lights import Light

ENTRY_POINT_GROUP = "progressived.drivers"


@dataclass(frozen=True, slots=True)
class SensorsReported:
    """The board's full sensor state changed (or was first reported after BoardOnline).

    ``present`` holds the seats (1-based) whose sensor carries a wager; ``board_seq`` is the
    frame sequence number of the board's report.
    """

    present: frozenset[int]
    board_seq: int


@dataclass(frozen=True, slots=True)
class KeyPressed:
    """A key press on the dealer's keypad, delivered exactly once and in order per boot.

    ``idempotency_key`` is ``f"{board_id}:{boot_id:08x}:{key_seq}"``: unique per press
    across retransmissions, reconnections and board reboots. Persist it with whatever the
    press did if the daemon must survive its own restart without applying a press twice.
    """

    code: str
    key_seq: int
    board_id: str
    boot_id: int = 0
    idempotency_key: str = ""


@dataclass(frozen=True, slots=True)
class SupervisorKey:
    """The supervisor key switch turned on or off."""

    on: bool


@dataclass(frozen=True, slots=True)
class BoardOnline:
    """The board said hello (protocol version and id); a SensorsReported follows."""

    board_id: str
    protocol_version: int


@dataclass(frozen=True, slots=True)
class BoardOffline:
    """The board is gone: missed heartbeats, port lost, board rebooted or driver stopped."""

    reason: str


BoardEvent = SensorsReported | KeyPressed | SupervisorKey | BoardOnline | BoardOffline


@runtime_checkable
class BoardDriver(Protocol):
    """What the daemon needs from a sensor board."""

    async def run(self) -> None:
        """Connect, reconnect with backoff, until :meth:`stop`. Never raises on bad input."""
        ...

    async def next_event(self) -> BoardEvent:
        """The next event, waiting for one."""
        ...

    def events(self) -> AsyncIterator[BoardEvent]:
        """``async for event in driver.events()``: :meth:`next_event` forever."""
        ...

    def key_handled(self, event: KeyPressed) -> None:
        """The daemon has journaled (or refused) every press up to ``event``.

        Only now may the driver acknowledge them to the board; before, the board keeps
        retransmitting them, so no press is lost to a crash between receipt and journal.
        """

    async def set_lights(self, lights: Mapping[int, Light]) -> None:
        """The lights every seat should show; resent until the board acknowledges them."""
        ...

    async def stop(self) -> None:
        """Stop :meth:`run` and close the port."""
        ...

    @property
    def counters(self) -> Mapping[str, int]:
        """good_frames, crc_errors, resyncs, duplicates, reconnects and more (see docs)."""
        ...

    @property
    def online(self) -> bool: ...


class DriverFactory(Protocol):
    """A driver plugin: validates its own settings section and builds the driver."""

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
