"""The board driver interface: the one small contract between the daemon and table hardware.

A driver turns a table sensor board into a stream of :data:`BoardEvent` and takes the
lights to show. Consume events with ``await driver.next_event()`` (one consumer). Until a
:class:`BoardOnline` arrives the board is offline: no sensor or key input is available.

Drivers live in the ``progressived_drivers`` package (or any other distribution) and
register a factory under the ``progressived.drivers`` entry-point group; the daemon finds them
by name (:mod:`progressived.config.drivers`), so ``progressived`` never imports a driver, and
loads only the configured one, when the configuration names it. Events flow in, light
commands flow out.

The contract is driver-neutral: the daemon reads a key press's ``code`` and, if the board
can give one, its ``idempotency_key``. Sequence numbers, board and boot ids are the
driver's own business (it gets the event back in :meth:`BoardDriver.key_handled` to
acknowledge the press); a board without them leaves them at their defaults and makes
``key_handled`` do nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from progressived.board.lights import Light


@dataclass(frozen=True, slots=True)
class SensorsReported:
    """The board's full sensor state changed (or was first reported after BoardOnline).

    ``present`` holds the seats (1-based) whose sensor carries a wager; ``board_seq`` is the
    frame sequence number of the board's report (0 for a board without one).
    """

    present: frozenset[int]
    board_seq: int = 0


@dataclass(frozen=True, slots=True)
class KeyPressed:
    """A key press on the dealer's keypad, delivered exactly once and in order per boot.

    ``idempotency_key``, when the board can give one, is unique per press across
    retransmissions, reconnections and board reboots (the serial driver's is
    ``f"{board_id}:{boot_id:08x}:{key_seq}"``); the daemon journals it with whatever the press
    did, so a press delivered again after a restart is not applied twice. ``""`` means the
    board cannot tell a retransmission from a new press. ``key_seq``, ``board_id`` and
    ``boot_id`` are an acknowledgement token the daemon never reads: the driver gets the
    event back in :meth:`BoardDriver.key_handled`.
    """

    code: str
    key_seq: int = 0
    board_id: str = ""
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
        A board without acknowledgements does nothing here.
        """

    async def set_lights(self, lights: Mapping[int, Light]) -> None:
        """The lights every seat should show; resent until the board acknowledges them."""
        ...

    async def stop(self) -> None:
        """Stop :meth:`run` and close the port."""
        ...

    @property
    def counters(self) -> Mapping[str, int]:
        """Monotonic counts of what the link saw, by name (the serial driver's: good_frames,
        crc_errors, resyncs, duplicates, reconnects and more; see docs). Exported as
        ``progressive_board_events_total{counter=NAME}``; may be empty."""
        ...

    @property
    def online(self) -> bool: ...


class DriverSettings(Protocol):
    """A driver's validated ``[board]`` section (its own type; the daemon only reads this)."""

    @property
    def seats(self) -> int | None:
        """How many seats the board has, when the settings say; checked against the table."""
        ...


class DriverFactory(Protocol):
    """A driver plugin: validates its own settings section and builds the driver.

    ``create`` gets back what this factory's ``validate`` returned; it may check that it is
    its own settings type (and raise ``TypeError`` otherwise).
    """

    def validate(self, section: Mapping[str, object]) -> DriverSettings: ...

    def create(self, settings: DriverSettings) -> BoardDriver: ...
