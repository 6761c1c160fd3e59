"""The daemon's side of the operator desk's port (:class:`progressived.daemon.port.DeskPort`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import structlog

from progressived.board.driver import BoardDriver
from progressived.daemon.board_input import BoardInput
from progressived.daemon.health import Health, assess
from progressived.daemon.journal import Journal
from progressived.daemon.port import (
    DeskStatus,
    LinkStatus,
    Note,
    ParameterCheck,
    ParameterPlan,
    SlipVoided,
    Submitted,
)
from progressived.daemon.slip_printer import SlipPrinting
from progressived.engine import Command
from progressived.ledger import LedgerError, LedgerUnavailable
from progressived.ledger.slips import SlipRefused

log = structlog.get_logger("progressived.operator")


class DaemonDesk:
    """Implements :class:`DeskPort` over the journal, the board input and health."""

    def __init__(
        self,
        journal: Journal,
        board_input: BoardInput,
        driver: BoardDriver,
        health: Health,
        *,
        version: str,
        metrics_port: Callable[[], int | None],
        link_status: Callable[[], LinkStatus | None] = lambda: None,
        archive_status: Callable[[], Mapping[str, Any] | None] = lambda: None,
        printing: SlipPrinting | None = None,
    ) -> None:
        self._journal = journal
        self._board_input = board_input
        self._driver = driver
        self._health = health
        self._version = version
        self._metrics_port = metrics_port
        self._link_status = link_status
        self._archive_status = archive_status
        self._printing = printing

    def now(self) -> str:
        return self._journal.clock()

    def status(self) -> DeskStatus:
        j, h = self._journal.current, self._health
        ok, why = assess(h, j.config.watchdog, j.state.closed)
        broker = h.broker
        return DeskStatus(
            table_id=j.params.table_id,
            paytable_id=j.params.paytable.id,
            version=self._version,
            state=j.state,
            meter_ids=tuple(j.params.meter_ids),
            board_online=h.board_online,
            board_counters=dict(self._driver.counters),
            broker_connected=h.broker_connected,
            ledger_ok=h.ledger_ok,
            ledger_error=h.last_error,
            head_seq=j.head_seq,
            ledger_path=j.config.ledger.path,
            healthy=ok,
            health=why,
            metrics_port=self._metrics_port(),
            link=self._link_status(),
            broker_state=broker.state if broker is not None else "",
            broker_error=broker.detail if broker is not None else "",
            broker_denied=dict(broker.denied) if broker is not None else {},
            broker_denied_total=broker.denied_total if broker is not None else 0,
            archive=self._archive_status(),
            slips=self._slips(),
        )

    def _slips(self) -> dict[str, Any] | None:
        if self._printing is None:
            return None
        p = self._printing.status()
        return {
            "printer": p.printer,
            "state": p.state.value,
            "unprinted": p.unprinted,
            "error": p.error,
            "since": p.since,
        }

    async def submit(self, command: Command, *, note: Note | None = None) -> Submitted:
        return await self._journal.submit(command, note=note)

    async def record(self, kind: str, detail: Mapping[str, Any], *, actor: str) -> bool:
        return await self._journal.record(kind, detail, actor=actor)

    async def change_parameters(self, check: ParameterCheck) -> ParameterPlan | str:
        j = self._journal
        async with j.lock:
            plan = check(j.state, j.current.config)
            if isinstance(plan, str) or not plan.changes:
                return plan
            detail = dict(plan.detail)
            why_not = await j.writer.reconfigure_locked(plan.config, detail, actor=plan.actor)
            if why_not is not None:
                return why_not
            self._board_input.keypad = self._board_input.new_keypad()
            log.info(
                "parameters changed",
                changes=plan.changes,
                operator=plan.actor,
                approver=detail.get("approver"),
            )
        j.observers.changed()
        return plan

    async def void_slip(
        self, serial: str, *, reason: str, by: str, reissue: bool
    ) -> SlipVoided | str:
        j = self._journal
        async with j.lock:
            at = j.journal_clock.stamp(j.clock())
            try:
                again = await j.writer.executor.run(
                    j.current.ledger.void_slip, serial, reason=reason, by=by, at=at, reissue=reissue
                )
            except LedgerUnavailable as exc:
                await j.writer.failed(exc)
                return f"the ledger is unavailable: {exc}"
            except (SlipRefused, LedgerError) as exc:
                return str(exc)
        log.info("slip voided", serial=serial, by=by, reissued_as=again and again.serial)
        if self._printing is not None:  # its VOID copy and the reissue's, now
            self._printing.wake()
        return SlipVoided(serial, again.serial if again is not None else None)

    async def reprint_slip(self, serial: str, *, reason: str, by: str) -> int | str:
        if self._printing is None:
            return "this table has no slip printer ([slips.printer])"
        j = self._journal
        async with j.lock:
            try:
                counts = await j.slip_copies(serial)
            except LedgerError as exc:
                return f"the ledger cannot be read: {exc}"
            if not counts.get("slip_issued"):
                return f"no slip {serial} in this ledger"
            n = counts.get("slip_reprint", 0) + 1
            detail = {"serial": serial, "n": n, "reason": reason, "by": by}
            try:
                if not await j.record("slip_reprint", detail, publish=False, actor=by):
                    return "the ledger is unavailable"
            except LedgerError as exc:  # an id the ledger refuses (a "|", a line break)
                return str(exc)
        self._printing.wake()
        return n

    async def print_now(self, serial: str) -> list[str] | str:
        if self._printing is None:
            return "this table has no slip printer ([slips.printer])"
        try:
            queue = await self._journal.slip_print_queue()
        except LedgerError as exc:
            return f"the ledger cannot be read: {exc}"
        waiting = [j.label for j in queue if j.stored.slip.serial == serial]
        if not waiting:
            return f"slip {serial} has no copy waiting to print (printed, or no such slip)"
        self._printing.wake()
        return waiting
