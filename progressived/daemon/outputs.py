"""What the table shows: seat lights on the board, meter payloads for the signs.

Redrawn after every journaled change (:attr:`Journal.changed`); also the publisher's hook,
which times key press -> publish.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog

from progressived.board.driver import BoardDriver
from progressived.board.lights import Light, lights
from progressived.core.money import cents, display
from progressived.daemon.health import Health
from progressived.daemon.journal import Journal
from progressived.mqtt.payloads import (
    closures,
    meter_payload,
    meter_state,
    meter_units,
    pending_awards,
)
from progressived.mqtt.publisher import SignPublisher

log = structlog.get_logger("progressived")


class Outputs:
    """Lights and meters, drawn from the journal's state and the ledger's health."""

    def __init__(
        self, journal: Journal, publisher: SignPublisher, driver: BoardDriver, health: Health
    ) -> None:
        self.journal = journal
        self.publisher = publisher
        self.driver = driver
        self.health = health
        self._lights: dict[int, Light] | None = None

    def redraw(self) -> None:
        """Meter payloads for every meter, and the lights if they changed."""
        j = self.journal
        params, state = j.params, j.state
        head = j.ledger.head_seq
        # Stamped by the journal's clock: never earlier than the row ``head`` (or any before),
        # and never earlier than the meter message before it, even if the wall clock steps back.
        ts = j.journal_clock.stamp()
        board_online, ledger_ok = self.health.board_online, self.health.ledger_ok
        for meter in params.meters:
            linked = meter.link is not None
            # A linked meter shows the link's value (its retained meter topic); until the
            # table has heard it, the meter is closed ("waiting for link"), never $0.00 open.
            view = j.linked_meters.get(meter.id) if linked else None
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
        if not self.health.ledger_ok and state.phase.value == "open":
            shown = dict.fromkeys(shown, Light.CLOSED)
        if shown != self._lights:
            self._lights = shown
            task = asyncio.get_running_loop().create_task(self.driver.set_lights(shown))
            task.add_done_callback(log_task_error)

    def resend_lights(self) -> None:
        """The board (re)connected: it shows nothing until told again."""
        self._lights = None
        self.redraw()

    # ------------------------------------------------------------- publisher hooks
    def published(self, topic: str, seq: int, first_seen: float | None) -> None:
        j = self.journal
        started = j.key_started.pop(seq, None)
        if started is not None and j.metrics is not None:
            j.metrics.key_to_publish.labels(j.params.table_id).observe(
                time.perf_counter() - started
            )
        j.notify("published", {"topic": topic, "seq": seq, "first_seen": first_seen})


def linked_fields(link: str, view: Any) -> dict[str, Any]:
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
