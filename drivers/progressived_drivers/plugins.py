"""Entry points: how the daemon finds these drivers without importing them.

Registered in pyproject.toml under ``progressived.drivers`` (board drivers) and
``progressived.ctl`` (extra ``progressivectl`` subcommands).
"""

from __future__ import annotations

from collections.abc import Mapping

from progressived.board.driver import BoardDriver, DriverFactory, DriverSettings
from progressived_drivers.board_settings import BoardSettings


class SerialDriverFactory:
    """``driver = "serial"``: a sensor board on a serial port (USB adapter or UART).

    Validating the settings imports only the settings model; the driver and pyserial are
    imported when the daemon creates the driver.
    """

    def validate(self, section: Mapping[str, object]) -> BoardSettings:
        return BoardSettings.model_validate(dict(section))

    def create(self, settings: DriverSettings) -> BoardDriver:
        if not isinstance(settings, BoardSettings):
            raise TypeError(f"the serial driver needs BoardSettings, not {type(settings)!r}")
        from progressived_drivers.serial_board import SerialBoardDriver  # noqa: PLC0415 (lazy: pyserial)

        driver: BoardDriver = SerialBoardDriver(settings)
        return driver


SERIAL: DriverFactory = SerialDriverFactory()
