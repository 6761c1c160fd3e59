"""The board simulator on a pty, found through its entry point.

progressived never imports ``drivers`` (drivers depend on progressived): the simulator is
registered by the drivers distribution under the ``progressived.testing`` entry-point
group as ``board-simulator``. Any class with the same constructor and the :class:`PtyBoard`
methods can stand in.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol

ENTRY_POINT_GROUP = "progressived.testing"
SIMULATOR = "board-simulator"


class PtyBoard(Protocol):
    """What the rig does with a board: open its pty, play a table on it, close it.

    ``present`` (the seats whose sensors hold a wager), ``supervisor_on`` and
    ``heartbeat_interval_s`` are read by the benchmarks to time a press against the board's
    own state."""

    present: set[int]
    supervisor_on: bool
    heartbeat_interval_s: float

    async def start(self) -> str: ...

    async def stop(self) -> None: ...

    def place_bet(self, seat: int) -> None: ...

    def remove_bet(self, seat: int) -> None: ...

    def press(self, code: str) -> int: ...

    def supervisor(self, on: bool) -> None: ...


BoardFactory = Callable[[Path], PtyBoard]


class NoSimulator(LookupError):
    """No distribution registers a board simulator (the drivers are not installed)."""


def simulator(link: Path, *, seats: int = 7, heartbeat_interval_s: float = 1.0) -> PtyBoard:
    """A board simulator (not yet started) that will open its pty at ``link``."""
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=SIMULATOR):
        factory: Callable[..., PtyBoard] = ep.load()
        return factory(link=link, seats=seats, heartbeat_interval_s=heartbeat_interval_s)
    raise NoSimulator(
        f"no board simulator: no '{SIMULATOR}' entry point in group '{ENTRY_POINT_GROUP}' "
        "(install progressived with its drivers)"
    )


def simulator_factory(*, seats: int = 7, heartbeat_interval_s: float = 1.0) -> BoardFactory:
    """:func:`simulator` with these settings, for :func:`progressived.testing.rig.table`."""

    def make(link: Path) -> PtyBoard:
        return simulator(link, seats=seats, heartbeat_interval_s=heartbeat_interval_s)

    return make
