"""What the table shows: seat lights on the board, meter payloads for the signs.

Redrawn after every journaled change (the journal's ``changed`` observer), when the board
comes back, and when the link publishes a linked meter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import structlog

from progressived.board.driver import BoardDriver
from progressived.board.lights import Light, lights
from progressived.core.money import cents, display
from progressived.daemon.current import CurrentTable
from progressived.daemon.health import Health
from progressived.engine.state import Phase
from progressived.link.core.messages import LinkedMeter
from progressived.mqtt.payloads import (
    closures,
    meter_payload,
    meter_state,
    meter_units,
    pending_awards,
)
from progressived.mqtt.publisher import SignPublisher
from progressived.runtime.clock import JournalClock

log = structlog.get_logger("progressived")


class Outputs:
    """Lights and meters, drawn from the table as journaled and the ledger's health.

    ``linked``: the link's latest value of each linked meter (the link client's, read here).
    """

    def __init__(
        self,
        *,
        current: CurrentTable,
        publisher: SignPublisher,
        driver: BoardDriver,
        health: Health,
        journal_clock: JournalClock,
        linked: Mapping[str, LinkedMeter],
    ) -> None:
        self.current = current
        self.publisher = publisher
        self.driver = driver
        self.health = health
        self.journal_clock = journal_clock
        self.linked = linked
        self._lights: dict[int, Light] | None = None

    def redraw(self) -> None:
        """Meter payloads for every meter, and the lights if they changed."""
        params, state = self.current.params, self.current.state
        head = self.current.head_seq
        # Stamped by the journal's clock: never earlier than the row ``head`` (or any before),
        # and never earlier than the meter message before it, even if the wall clock steps back.
        ts = self.journal_clock.stamp()
        board_online, ledger_ok = self.health.board_online, self.health.ledger_ok
        for meter in params.meters:
            linked = meter.link is not None
            # A linked meter shows the link's value (its retained meter topic); until the
            # table has heard it, the meter is closed ("waiting for link"), never $0.00 open.
            view = self.linked.get(meter.id) if linked else None
            heard = not linked or view is not None
            shown_state = meter_state(state, meter.id, board_online, linked, heard)
            if not ledger_ok:
                shown_state = "closed"
            payload = meter_payload(
                table_id=params.table_id,
                meter_id=meter.id,
                units=meter_units(state, meter.id),
                seq=head,
                state=shown_state,
                ts=ts,
                pending=pending_awards(state, meter.id),
                closed=closures(state, board_online=board_online, ledger_ok=ledger_ok, heard=heard),
            )
            if linked:
                # The link's value, with its epoch and sequence.
                payload.update(linked_fields(meter.link or "", view))
            self.publisher.set_meter(meter.id, payload)
        self.publisher.wake()
        shown = lights(state, params.seats)
        if not self.health.ledger_ok and state.phase is Phase.OPEN:
            shown = dict.fromkeys(shown, Light.CLOSED)
        if shown != self._lights:
            self._lights = shown
            task = asyncio.get_running_loop().create_task(self.driver.set_lights(shown))
            task.add_done_callback(log_task_error)

    def resend_lights(self) -> None:
        """The board (re)connected: it shows nothing until told again."""
        self._lights = None
        self.redraw()


def linked_fields(link: str, view: LinkedMeter | None) -> dict[str, Any]:
    """A linked meter's sign fields: the link's value, epoch and sequence (none yet: 0)."""
    units = int(view.units) if view is not None else 0
    return {
        "cents": cents(units),
        "display": display(units),
        "link": {
            "id": link,
            "epoch": int(view.epoch) if view is not None else 0,
            "lseq": int(view.lseq) if view is not None else 0,
        },
    }


def log_task_error(task: asyncio.Future[Any]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("task failed", task=getattr(task, "get_name", lambda: "?")(), error=repr(exc))
