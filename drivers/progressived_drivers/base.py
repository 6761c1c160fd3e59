"""The board-driver interface, defined in :mod:`progressived.board.driver` and re-exported here.

Drivers depend on progressived, never the reverse: the daemon finds drivers through the
``progressived.drivers`` entry-point group.
"""

from progressived.board.driver import (
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
