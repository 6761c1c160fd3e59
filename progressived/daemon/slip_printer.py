"""The slip printer's queue: every copy the ledger asks for, printed once, whatever the
printer does (docs/slips.md, "Printing").

The queue is the ledger itself: a ``slip_issued`` row names the copies to print, a
``slip_voided`` row of a printed slip asks for its VOID copy, a ``slip_reprint`` row for a
reprint, and a ``slip_printed`` row (journaled once the printer has answered after the
copy) marks one done. So a printer that is off, unreachable or out of paper leaves copies
queued, never blocks or loses a round (the journal does not wait for it), and after a
restart the daemon prints what the ledger still asks for. A copy whose ``slip_printed``
row could not be journaled (the ledger unavailable) is not printed again: it is journaled
first when the ledger is back.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from prometheus_client.core import GaugeMetricFamily

from progressived.ledger.slip_reads import PRINTED, PrintJob
from progressived.printing.network import PrintFailed
from progressived.slips.slip import Slip, Void
from progressived.slips.text import Copy

log = structlog.get_logger("progressived.slips")


class QueueJournal(Protocol):
    """What the queue needs of the journal (:class:`~progressived.daemon.journal.Journal`):
    reads on the ledger thread, a system record, the clock."""

    async def slip_print_queue(self) -> list[PrintJob]: ...

    async def slip_rows_head(self) -> int: ...

    async def record(
        self,
        kind: str,
        detail: Mapping[str, Any],
        *,
        publish: bool = True,
        actor: str = "system",
        idempotency_key: str | None = None,
    ) -> bool: ...

    def clock(self) -> str: ...


class Printer(Protocol):
    """A receipt printer: :class:`progressived.printing.network.NetworkPrinter` or
    :class:`progressived.printing.serial.SerialPrinter`."""

    @property
    def name(self) -> str: ...

    def print_copy(
        self, slip: Slip, at: str, copy: Copy, row_hash: str, *, void: Void | None = None
    ) -> None: ...


class PrinterState(enum.StrEnum):
    READY = "ready"  # the last copy printed, or none tried yet
    UNREACHABLE = "unreachable"
    OUT_OF_PAPER = "out-of-paper"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True, slots=True)
class PrintStatus:
    """What ``status``, the metrics and the desk show."""

    printer: str
    state: PrinterState
    unprinted: int
    error: str
    since: str


class SlipPrinting:
    """Prints the ledger's queued copies on ``printer``; ``retry_s`` after a failure."""

    def __init__(
        self, journal: QueueJournal, printer: Printer, *, retry_s: float, poll_s: float = 1.0
    ) -> None:
        self._journal = journal
        self._printer = printer
        self._retry_s = retry_s
        self._poll_s = poll_s
        self._wake = asyncio.Event()
        self._printed_unjournaled: dict[str, PrintJob] = {}
        self._attempts: dict[str, int] = {}
        self._state = PrinterState.READY
        self._error = ""
        self._since = ""
        self._unprinted = 0
        self._last_seen = -1

    def status(self) -> PrintStatus:
        return PrintStatus(
            self._printer.name, self._state, self._unprinted, self._error, self._since
        )

    def wake(self) -> None:
        """Try now (an operator's print or reprint, a new slip)."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            delay = self._poll_s
            try:
                if not await self._round():
                    delay = self._retry_s
            except Exception as exc:  # a ledger read that failed: try again later
                log.warning("slip queue not read", error=str(exc))
                delay = self._retry_s
            self._wake.clear()
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _round(self) -> bool:
        """Print what is queued; False when the printer failed (wait ``retry_s``)."""
        seen = await self._journal.slip_rows_head()
        if seen == self._last_seen and not self._unprinted and not self._printed_unjournaled:
            return True
        jobs = await self._journal.slip_print_queue()
        self._unprinted = len(jobs)
        self._last_seen = seen
        for job in jobs:
            if job.job not in self._printed_unjournaled:
                if not await self._print(job):
                    return False
                self._printed_unjournaled[job.job] = job
            if not await self._journal_printed(job):
                return False
            self._unprinted -= 1
        return True

    async def _print(self, job: PrintJob) -> bool:
        attempt = self._attempts.get(job.job, 0) + 1
        self._attempts[job.job] = attempt
        stored = job.stored
        try:
            await asyncio.to_thread(
                self._printer.print_copy,
                stored.slip,
                stored.at,
                Copy(job.label),
                stored.hash,
                void=stored.void,
            )
        except PrintFailed as exc:
            self._failed(PrinterState(exc.fault.value), exc.detail, job)
            return False
        except OSError as exc:
            self._failed(PrinterState.INTERRUPTED, str(exc), job)
            return False
        if self._state is not PrinterState.READY:
            log.info("slip printer back", printer=self._printer.name)
        self._state, self._error, self._since = PrinterState.READY, "", ""
        return True

    def _failed(self, state: PrinterState, detail: str, job: PrintJob) -> None:
        if state is not self._state:
            self._since = self._journal.clock()
            log.warning(
                "slip not printed: kept in the queue",
                printer=self._printer.name,
                state=state.value,
                error=detail,
                job=job.job,
            )
        self._state, self._error = state, detail

    async def _journal_printed(self, job: PrintJob) -> bool:
        attempts = self._attempts.pop(job.job, 1)
        detail = {
            "job": job.job,
            "serial": job.stored.slip.serial,
            "copy": job.label,
            "printer": self._printer.name,
            "attempts": attempts,
        }
        if not await self._journal.record("slip_printed", detail, publish=False, actor="printer"):
            self._attempts[job.job] = attempts
            return False
        self._printed_unjournaled.pop(job.job, None)
        return True


class SlipsCollector:
    """``progressive_slips_unprinted`` and ``progressive_slip_printer_ready`` at scrape time."""

    def __init__(self, table_id: str, status: Callable[[], PrintStatus]) -> None:
        self._table, self._status = table_id, status

    def collect(self) -> Iterable[Any]:
        s = self._status()
        unprinted = GaugeMetricFamily(
            "progressive_slips_unprinted",
            "Payout slip copies the ledger asks for that the printer has not printed.",
            labels=["table"],
        )
        unprinted.add_metric([self._table], s.unprinted)
        yield unprinted
        ready = GaugeMetricFamily(
            "progressive_slip_printer_ready",
            "1 when the slip printer printed the last copy tried (or none was tried yet).",
            labels=["table", "state"],
        )
        ready.add_metric([self._table, s.state.value], 1 if s.state is PrinterState.READY else 0)
        yield ready


__all__ = ["PRINTED", "PrintStatus", "PrinterState", "SlipPrinting", "SlipsCollector"]
