"""Printing payout slips on an ESC/POS printer on a serial line: a real pseudo-terminal
stands for the port, its other side keeps the bytes, answers the paper sensor, and the
bytes are decoded back to the slip's lines; a missing device is unreachable, an empty
paper roll is out of paper."""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from progressived.config.slips import PrinterSection
from progressived.core.params import TableParams
from progressived.ledger.slip_reads import StoredSlip, slips
from progressived.printing.network import Fault, PrintFailed
from progressived.printing.serial import SerialPrinter
from progressived.slips.text import ORIGINAL
from progressived.testing.receipt_printer import PAPER_END, PAPER_OK, STATUS_QUERY, decode
from tests.helpers import table
from tests.test_slip_printing import open_ledger
from tests.test_slips import hit_round, play


class SerialEnd:
    """The printer's end of a pseudo-terminal: keeps what arrives, answers DLE EOT 4."""

    def __init__(self, *, paper: bool = True) -> None:
        self.master, self.slave = os.openpty()
        self.path = os.ttyname(self.slave)
        self.paper = paper
        self.got = bytearray()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        answered = 0
        while not self._stop.is_set():
            if not select.select([self.master], [], [], 0.05)[0]:
                continue
            try:
                self.got += os.read(self.master, 4096)
            except OSError:
                return
            while (at := self.got.find(STATUS_QUERY, answered)) >= 0:
                answered = at + len(STATUS_QUERY)
                os.write(self.master, bytes([PAPER_OK if self.paper else PAPER_END]))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def params() -> TableParams:
    return table("tcp-sd-1")


@pytest.fixture
def port() -> Iterator[SerialEnd]:
    end = SerialEnd()
    yield end
    end.close()


def a_slip(tmp_path: Path, params: TableParams) -> StoredSlip:
    db = tmp_path / "ledger.db"
    with open_ledger(db, params) as ledger:
        play(ledger, params, *hit_round(params))
    return slips(db)[0]


def test_a_copy_printed_over_a_serial_line_reads_back_field_by_field(
    tmp_path: Path, params: TableParams, port: SerialEnd
) -> None:
    stored = a_slip(tmp_path, params)
    printer = SerialPrinter(port.path, 115200, timeout_s=2.0, dsrdtr=False)
    printer.print_copy(stored.slip, stored.at, ORIGINAL, stored.hash)
    # The paper sensor's second answer came after every byte of the slip: all are here.
    (receipt,), _rest = decode(bytes(port.got))
    for expected in ("ORIGINAL", stored.slip.serial, "$1,000.00", "ONE THOUSAND AND 00/100"):
        assert expected in receipt.text, expected
    assert receipt.qr and stored.slip.serial in receipt.qr[0]
    assert port.got.count(STATUS_QUERY) == 2  # asked before and after the slip


def test_an_empty_roll_is_out_of_paper_and_a_missing_device_unreachable(
    tmp_path: Path, params: TableParams, port: SerialEnd
) -> None:
    stored = a_slip(tmp_path, params)
    port.paper = False
    with pytest.raises(PrintFailed) as out:
        SerialPrinter(port.path, timeout_s=2.0, dsrdtr=False).print_copy(
            stored.slip, stored.at, ORIGINAL, stored.hash
        )
    assert out.value.fault is Fault.OUT_OF_PAPER
    with pytest.raises(PrintFailed) as gone:
        SerialPrinter(str(tmp_path / "ttyUSB9"), timeout_s=1.0).print_copy(
            stored.slip, stored.at, ORIGINAL, stored.hash
        )
    assert gone.value.fault is Fault.UNREACHABLE


def test_the_section_names_a_printer_one_way() -> None:
    serial = PrinterSection.model_validate({"device": "/dev/ttyUSB0", "baudrate": 19200})
    assert serial.where == "/dev/ttyUSB0"
    assert PrinterSection.model_validate({"host": "10.0.0.9"}).where == "10.0.0.9:9100"
    for both_or_none in ({"host": "10.0.0.9", "device": "/dev/ttyUSB0"}, {}):
        with pytest.raises(ValueError, match="host \\(network\\) or by device"):
            PrinterSection.model_validate(both_or_none)
    with pytest.raises(ValueError, match="one of 9600"):
        PrinterSection.model_validate({"device": "/dev/ttyUSB0", "baudrate": 12345})
