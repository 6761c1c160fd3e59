"""Board input: board events -> keypad -> commands for the journal.

The board's presses become commands through the keypad; sensors, the supervisor key and the
board's coming and going are journaled. A press is acknowledged to the driver only once its
sequence is journaled (or refused), so a crash in between makes the board send it again.
"""

from __future__ import annotations

import time

import structlog

from progressived.board.driver import (
    BoardDriver,
    BoardEvent,
    BoardOffline,
    BoardOnline,
    KeyPressed,
    SensorsReported,
    SupervisorKey,
)
from progressived.board.keypad import KeypadInterpreter, OutcomeKind
from progressived.daemon.health import Health
from progressived.daemon.journal import Journal
from progressived.daemon.observers import Notify
from progressived.daemon.outputs import Outputs
from progressived.engine import Sensors, SetClosed
from progressived.ledger import LedgerError

log = structlog.get_logger("progressived")

BOARD_OFFLINE = "board offline"


class BoardInput:
    """Feeds one board's events to the journal."""

    def __init__(
        self,
        *,
        journal: Journal,
        outputs: Outputs,
        driver: BoardDriver,
        health: Health,
        notify: Notify,
    ) -> None:
        self.journal = journal
        self.notify = notify
        self.outputs = outputs
        self.driver = driver
        self.health = health
        self.keypad = self.new_keypad()

    def new_keypad(self) -> KeypadInterpreter:
        """A keypad for the journal's current parameters (again after a reload)."""
        config = self.journal.current.config
        return KeypadInterpreter(
            config.keypad, config.params.paytable.hand_ids, config.params.seats
        )

    async def handle(self, event: BoardEvent) -> None:
        j = self.journal
        now = j.clock()
        match event:
            case SensorsReported(present=present):
                await j.submit(Sensors(present=present, at=now, actor="board"))
            case KeyPressed():
                started = time.perf_counter()
                outcome = self.keypad.feed(event, now)
                self.notify("key", {"code": event.code, "display": outcome.display})
                if outcome.kind is OutcomeKind.COMMAND and outcome.command is not None:
                    await j.submit(
                        outcome.command,
                        idempotency_key=event.idempotency_key or None,
                        started=started,
                    )
                elif outcome.kind is OutcomeKind.REFUSED:
                    log.warning("key sequence refused", code=event.code, display=outcome.display)
                    await j.record(
                        "key_refused",
                        {"code": event.code, "reason": outcome.display},
                        actor="dealer",
                        idempotency_key=event.idempotency_key or None,
                    )
                if outcome.kind is not OutcomeKind.PENDING:
                    # The sequence is journaled (or refused): only now may the board forget
                    # its presses. A crash before this makes the board send them again, and
                    # the idempotency key stops a second application.
                    self.driver.key_handled(event)
            case SupervisorKey():
                self.keypad.feed(event, now)
                await j.record(
                    "supervisor_key", {"on": event.on}, publish=False, actor="supervisor"
                )
            case BoardOnline(board_id=board_id, protocol_version=version):
                self.health.board_online = True
                await j.record("board_online", {"board_id": board_id, "protocol_version": version})
                opened = SetClosed(reason=BOARD_OFFLINE, closed=False, at=now, actor="system")
                await j.submit(opened)
                self.outputs.resend_lights()
            case BoardOffline(reason=reason):
                self.health.board_online = False
                self.health.board_offline_since = time.monotonic()
                self.keypad.reset()
                await j.record("board_offline", {"reason": reason})
                await j.submit(SetClosed(reason=BOARD_OFFLINE, closed=True, at=now, actor="system"))

    async def run(self) -> None:
        """Forever: the next board event, handled; a ledger fault closes the progressive."""
        while True:
            event = await self.driver.next_event()
            self.health.loop_beat = time.monotonic()
            try:
                await self.handle(event)
            except LedgerError as exc:
                await self.journal.writer.failed(exc)
