"""An ESC/POS receipt printer on the network (TCP, port 9100), through python-escpos's
``Network`` printer (and, through the same steps, on a serial line: :mod:`.serial`).

Each copy is one connection: connect, ask the paper sensor (DLE EOT 4), draw the slip, ask
again, close. The second answer is the printer's word that it has taken every byte before
it (a printer answers in order), and that the paper did not run out under the slip. Any
failure is a :class:`PrintFailed` with its :class:`Fault`; the caller keeps the copy
queued and tries again later. Every socket operation is bounded by ``timeout_s``.
"""

from __future__ import annotations

import enum

from escpos.constants import RT_MASK_NOPAPER, RT_STATUS_PAPER
from escpos.escpos import Escpos
from escpos.exceptions import DeviceNotFoundError
from escpos.printer import Network

from progressived.printing.receipt import draw
from progressived.slips.slip import Slip, Void
from progressived.slips.text import Copy


class Fault(enum.StrEnum):
    """Why a copy did not print."""

    UNREACHABLE = "unreachable"  # no connection (off, unplugged, wrong address)
    OUT_OF_PAPER = "out-of-paper"  # the paper sensor says so
    INTERRUPTED = "interrupted"  # the connection broke, or the printer stopped answering


class PrintFailed(Exception):
    def __init__(self, fault: Fault, detail: str) -> None:
        super().__init__(f"{fault.value}: {detail}")
        self.fault = fault
        self.detail = detail


class EscposPrinter:
    """What every printer connection does: open, ask the paper sensor (DLE EOT 4), draw the
    slip, ask again, close; any failure a :class:`PrintFailed`. Subclasses say how to reach
    the printer (:meth:`device`); ``status`` off for a printer that does not answer status
    queries (then a copy counts as printed once its bytes are sent)."""

    status: bool = True

    @property
    def name(self) -> str:
        raise NotImplementedError

    def device(self) -> Escpos:
        """An unopened python-escpos printer for this connection."""
        raise NotImplementedError

    def print_copy(
        self, slip: Slip, at: str, copy: Copy, row_hash: str, *, void: Void | None = None
    ) -> None:
        """Print one copy, or raise :class:`PrintFailed` (blocking: run it off the loop)."""
        printer = self.device()
        try:
            printer.open()
        except DeviceNotFoundError as exc:
            raise PrintFailed(Fault.UNREACHABLE, str(exc).replace("\n", " ")) from None
        try:
            self._paper(printer, "before the slip")
            draw(printer, slip, at, copy, row_hash, void=void)
            self._paper(printer, "after the slip")
        except OSError as exc:  # TimeoutError and pyserial's SerialException too
            raise PrintFailed(Fault.INTERRUPTED, str(exc) or type(exc).__name__) from None
        finally:
            printer.close()

    def _paper(self, printer: Escpos, when: str) -> None:
        if not self.status:
            return
        answer = printer.query_status(RT_STATUS_PAPER)
        if not answer:
            raise PrintFailed(Fault.INTERRUPTED, f"the printer did not answer {when}")
        if answer[0] & RT_MASK_NOPAPER == RT_MASK_NOPAPER:
            raise PrintFailed(Fault.OUT_OF_PAPER, f"the paper sensor says no paper {when}")


class NetworkPrinter(EscposPrinter):
    """The printer at ``host``:``port`` (one TCP connection per copy)."""

    def __init__(
        self, host: str, port: int = 9100, *, timeout_s: float = 5.0, status: bool = True
    ) -> None:
        self.host, self.port, self.timeout_s, self.status = host, port, timeout_s, status

    @property
    def name(self) -> str:
        return f"{self.host}:{self.port}"

    def device(self) -> Escpos:
        return Network(self.host, self.port, timeout=self.timeout_s)
