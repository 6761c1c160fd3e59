"""Printing payout slips on an ESC/POS network printer: a real TCP listener keeps the bytes,
decoded back to text and checked field by field; the printer off, out of paper, switched
off mid-slip; every copy printed exactly once when it returns, across a restart."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from escpos.printer import Dummy

from progressived.core.params import TableParams
from progressived.daemon.slip_printer import PrinterState, SlipPrinting
from progressived.ledger import Ledger, LedgerUnavailable
from progressived.ledger.slip_reads import PrintJob, slips
from progressived.ledger.slips import SlipIssuer
from progressived.printing.network import Fault, NetworkPrinter, PrintFailed
from progressived.printing.receipt import draw
from progressived.slips.text import ORIGINAL, amount_in_words, qr_text
from progressived.testing.receipt_printer import TestPrinter, decode, picture
from progressived.testing.waits import until, until_sync
from tests.conftest import ROOT
from tests.helpers import table
from tests.test_slips import AT, hit_round, play, rules

COPIES = ("ORIGINAL", "DUPLICATE")


@pytest.fixture
def params() -> TableParams:
    return table("tcp-sd-1")


@pytest.fixture
def printer() -> Iterator[TestPrinter]:
    with TestPrinter() as p:
        yield p


class LedgerJournal:
    """The queue's view of the journal, over a real ledger (what the daemon's Journal does
    on its ledger thread)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.down = False

    async def slip_print_queue(self) -> list[PrintJob]:
        return self.ledger.slip_print_queue()

    async def slip_rows_head(self) -> int:
        return self.ledger.slip_rows_head()

    async def record(
        self,
        kind: str,
        detail: Mapping[str, Any],
        *,
        publish: bool = True,
        actor: str = "system",
        idempotency_key: str | None = None,
    ) -> bool:
        if self.down:
            return False
        try:
            self.ledger.record(kind, dict(detail), at=AT, actor=actor)
        except LedgerUnavailable:
            return False
        return True

    def clock(self) -> str:
        return AT


def open_ledger(db: Path, params: TableParams) -> Ledger:
    ledger = Ledger.open(db, params, at=AT)
    ledger.issue_slips(SlipIssuer(replace(rules(), copies=COPIES), lambda: params))
    return ledger


@contextlib.asynccontextmanager
async def printing(ledger: Ledger, printer: TestPrinter) -> AsyncIterator[SlipPrinting]:
    device = NetworkPrinter("127.0.0.1", printer.port, timeout_s=2.0)
    queue = SlipPrinting(LedgerJournal(ledger), device, retry_s=0.05, poll_s=0.05)
    task = asyncio.create_task(queue.run())
    try:
        yield queue
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_a_printed_copy_reads_back_field_by_field(tmp_path: Path, params: TableParams) -> None:
    db = tmp_path / "ledger.db"
    with open_ledger(db, params) as ledger:
        play(ledger, params, *hit_round(params))
    stored = slips(db)[0]
    with TestPrinter() as printer:
        NetworkPrinter("127.0.0.1", printer.port).print_copy(
            stored.slip, stored.at, ORIGINAL, stored.hash
        )
        # The listener files a copy when the connection closes: on its own thread, after
        # print_copy has returned.
        (receipt,) = until_sync(printer.receipts, "the copy filed by the printer")
    text = receipt.text
    for expected in (
        "Deadwood Grand",
        "ORIGINAL",
        "T1-000001",
        "AKQ Spades",
        "$1,000.00",
        "ONE THOUSAND AND 00/100 DOLLARS",
        "TAXABLE - report on IRS Form W-2G",
        "Prepared by:",
        "supervisor-7",
        "Preparer:",
        "A-1044",
        "2026-11-21 19:00:00 UTC",
    ):
        assert expected in text, expected
    assert receipt.qr == [qr_text(stored.slip, stored.hash)]
    assert receipt.qr[0] == f"PSLIP1 T1-000001 100000 {stored.hash}"
    if os.environ.get("PROGRESSIVE_SLIP_PICTURES"):  # docs/slips.md's picture of the receipt
        picture(receipt, str(ROOT / "docs" / "slips" / "receipt.png"))


def test_the_drawing_is_the_same_bytes_on_any_printer(tmp_path: Path, params: TableParams) -> None:
    db = tmp_path / "ledger.db"
    with open_ledger(db, params) as ledger:
        play(ledger, params, *hit_round(params))
    stored = slips(db)[0]
    dummy = Dummy()
    draw(dummy, stored.slip, stored.at, ORIGINAL, stored.hash)
    (receipt,), rest = decode(dummy.output)
    assert rest.lines == [] and "T1-000001" in receipt.text
    assert (
        amount_in_words(1_234_560_000) == "ONE THOUSAND TWO HUNDRED THIRTY FOUR AND 56/100 DOLLARS"
    )


def test_each_fault_is_named(tmp_path: Path, params: TableParams, printer: TestPrinter) -> None:
    db = tmp_path / "ledger.db"
    with open_ledger(db, params) as ledger:
        play(ledger, params, *hit_round(params))
    s = slips(db)[0]
    device = NetworkPrinter("127.0.0.1", printer.port, timeout_s=2.0)
    printer.out_of_paper()
    with pytest.raises(PrintFailed) as out:
        device.print_copy(s.slip, s.at, ORIGINAL, s.hash)
    assert out.value.fault is Fault.OUT_OF_PAPER
    printer.out_of_paper(False)
    printer.drop_after = 200  # switched off in the middle of the slip
    with pytest.raises(PrintFailed) as cut:
        device.print_copy(s.slip, s.at, ORIGINAL, s.hash)
    assert cut.value.fault is Fault.INTERRUPTED
    printer.stop()
    with pytest.raises(PrintFailed) as off:
        device.print_copy(s.slip, s.at, ORIGINAL, s.hash)
    assert off.value.fault is Fault.UNREACHABLE
    assert printer.receipts() == []  # nothing whole was printed


async def test_every_copy_prints_once_when_the_printer_returns(
    tmp_path: Path, params: TableParams, printer: TestPrinter
) -> None:
    db = tmp_path / "ledger.db"
    ledger = open_ledger(db, params)
    printer.stop()  # off for the shift
    async with printing(ledger, printer) as queue:
        play(ledger, params, *hit_round(params))  # the round is not held up by the printer
        await until(lambda: queue.status().state is PrinterState.UNREACHABLE, "unreachable")
        expected = 2 * len(slips(db))
        await until(lambda: queue.status().unprinted == expected, "the queue counted")
        printer.start()
        printer.out_of_paper()
        await until(lambda: queue.status().state is PrinterState.OUT_OF_PAPER, "no paper")
        printer.out_of_paper(False)
        printer.drop_after = 300  # the next copy is cut short by a power cut
        await until(lambda: queue.status().unprinted == 0, "the queue printed", timeout=30)
        await until(lambda: len(printer.receipts()) == expected, "every copy filed")
    ledger.close()
    labels = [(r.qr[0].split()[1], _label(r.lines)) for r in printer.receipts()]
    assert sorted(labels) == sorted((s.slip.serial, c) for s in slips(db) for c in COPIES)
    assert len(labels) == len(set(labels))  # once each
    # A restart prints nothing again: the ledger says every copy is done.
    ledger = open_ledger(db, params)
    async with printing(ledger, printer) as queue:
        await asyncio.sleep(0.3)
        assert queue.status().unprinted == 0
    ledger.close()
    assert len(printer.receipts()) == len(labels)


async def test_a_crash_before_the_print_prints_once_after_restart(
    tmp_path: Path, params: TableParams, printer: TestPrinter
) -> None:
    db = tmp_path / "ledger.db"
    ledger = open_ledger(db, params)
    play(ledger, params, *hit_round(params)[:5])  # the award and its slip, then the crash
    ledger.close()
    ledger = open_ledger(db, params)
    async with printing(ledger, printer) as queue:
        await until(lambda: len(printer.receipts()) == 2, "the original and the duplicate")
        await until(lambda: queue.status().unprinted == 0, "journaled")
        voided = ledger.void_slip("T1-000001", reason="torn", by="sup-2", at=AT, reissue=True)
        assert voided is not None
        await until(lambda: len(printer.receipts()) == 5, "the VOID and the reissue's copies")
    ledger.close()
    got = [(r.qr[0].split()[1], _label(r.lines)) for r in printer.receipts()]
    assert got == [
        ("T1-000001", "ORIGINAL"),
        ("T1-000001", "DUPLICATE"),
        ("T1-000001", "VOIDED SLIP"),
        ("T1-000002", "ORIGINAL"),
        ("T1-000002", "DUPLICATE"),
    ]
    void = printer.receipts()[2]
    assert "*** VOID ***" in [line.strip() for line in void.lines]
    assert "Voided by: sup-2" in void.lines


async def test_a_copy_printed_while_the_ledger_is_down_is_not_printed_twice(
    tmp_path: Path, params: TableParams, printer: TestPrinter
) -> None:
    db = tmp_path / "ledger.db"
    ledger = open_ledger(db, params)
    play(ledger, params, *hit_round(params)[:5])
    journal = LedgerJournal(ledger)
    journal.down = True
    device = NetworkPrinter("127.0.0.1", printer.port, timeout_s=2.0)
    queue = SlipPrinting(journal, device, retry_s=0.05, poll_s=0.05)
    task = asyncio.create_task(queue.run())
    try:
        await until(lambda: len(printer.receipts()) == 1, "the original printed")
        await asyncio.sleep(0.3)  # retries while the ledger refuses the slip_printed row
        assert len(printer.receipts()) == 1
        journal.down = False
        await until(lambda: queue.status().unprinted == 0, "both printed and journaled")
        await until(lambda: len(printer.receipts()) == 2, "both copies filed")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        ledger.close()
    assert [_label(r.lines) for r in printer.receipts()] == ["ORIGINAL", "DUPLICATE"]


def _label(lines: list[str]) -> str:
    """The copy's label: the first line of the three that head a slip that is one."""
    return next(
        line.strip()
        for line in lines
        if line.strip() in {*COPIES, "VOIDED SLIP"} or line.strip().startswith("REPRINT ")
    )


def test_the_queue_is_in_the_metrics() -> None:
    """``progressive_slips_unprinted`` and ``progressive_slip_printer_ready`` as Prometheus
    text, from the queue's status at scrape time."""
    from prometheus_client import CollectorRegistry, generate_latest

    from progressived.daemon.slip_printer import PrintStatus, SlipsCollector

    status = PrintStatus("10.0.0.9:9100", PrinterState.OUT_OF_PAPER, 3, "no paper", AT)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SlipsCollector("t1", lambda: status))
    text = generate_latest(registry).decode()
    assert 'progressive_slips_unprinted{table="t1"} 3.0' in text
    assert 'progressive_slip_printer_ready{state="out-of-paper",table="t1"} 0.0' in text
