"""Entry points: how the daemon finds these drivers without importing them.

Registered in pyproject.toml under ``progressived.drivers`` (board drivers) and
``progressived.ctl`` (extra ``progressivectl`` subcommands).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drivers.serial_board import BoardSettings, SerialBoardDriver
from progressived.board import BoardDriver


class SerialDriverFactory:
    """``driver = "serial"``: a sensor board on a serial port (USB adapter or UART)."""

    def validate(self, settings: Mapping[str, Any]) -> BoardSettings:
        return BoardSettings.model_validate(dict(settings))

    def create(self, settings: Any) -> BoardDriver:
        driver: BoardDriver = SerialBoardDriver(settings)
        return driver


SERIAL = SerialDriverFactory()
