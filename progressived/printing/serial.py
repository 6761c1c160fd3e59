"""An ESC/POS receipt printer on a serial line (RS-232, or USB through its serial
interface: ``/dev/ttyUSB0``, ``/dev/ttyACM0``), through python-escpos's ``Serial`` printer
and pyserial.

The same steps as on the network (:class:`~progressived.printing.network.EscposPrinter`):
the port opened for each copy, the paper sensor asked before and after the slip (the
answer after it is the printer's word that it took every byte, a serial printer answering
in order too), the port closed. A device that is missing or cannot be opened is
``unreachable``; no answer within ``timeout_s`` or a write that fails is ``interrupted``.
"""

from __future__ import annotations

from escpos.escpos import Escpos
from escpos.printer import Serial

from progressived.printing.network import EscposPrinter


class _Serial(Serial):  # type: ignore[misc]  # python-escpos has no type information
    """python-escpos's ``Serial`` reads 16 bytes or waits its whole timeout: the paper
    sensor answers one byte, so every copy would wait the timeout twice. Read the first
    byte (waiting at most the timeout), then what else has arrived."""

    def _read(self) -> bytes:
        first = bytes(self.device.read(1))
        return first + bytes(self.device.read(self.device.in_waiting)) if first else first


class SerialPrinter(EscposPrinter):
    """The printer on ``device`` at ``baudrate`` (8N1; ``dsrdtr`` hardware flow control)."""

    def __init__(
        self,
        device: str,
        baudrate: int = 9600,
        *,
        timeout_s: float = 5.0,
        status: bool = True,
        dsrdtr: bool = True,
    ) -> None:
        self.path, self.baudrate, self.timeout_s = device, baudrate, timeout_s
        self.status, self.dsrdtr = status, dsrdtr

    @property
    def name(self) -> str:
        return self.path

    def device(self) -> Escpos:
        return _Serial(
            devfile=self.path, baudrate=self.baudrate, timeout=self.timeout_s, dsrdtr=self.dsrdtr
        )
