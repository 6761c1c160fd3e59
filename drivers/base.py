"""The board-driver interface, defined in :mod:`progressived.board` and re-exported here.

Drivers depend on progressived, never the reverse: the daemon finds drivers through the
``progressived.drivers`` entry-point group.
"""

from progressived.board import (
    BoardDriver,
    BoardEvent,
    BoardOffline,
    BoardOnline,
    DriverFactory,
    DriverSettings,
    KeyPressed,
    SensorsReported,
    SupervisorKey,
)

__all__ = [
    "BoardDriver",
    "BoardEvent",
    "BoardOffline",
    "BoardOnline",
    "DriverFactory",
    "DriverSettings",
    "KeyPressed",
    "SensorsReported",
    "SupervisorKey",
]
