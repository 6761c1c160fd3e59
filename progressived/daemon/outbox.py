"""What each journal write hands the outbox: the MQTT messages built from its rows.

Built inside the ledger transaction (the message carries the row's ``seq``), so a message is
published if and only if its rows were committed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from progressived.daemon.ledger_executor import LedgerExecutor
from progressived.engine.events import Event
from progressived.ledger import JournalRow, Ledger, OutboxFn, OutboxMessage, OutboxRow
from progressived.mqtt.payloads import Topics, dumps, event_payload, system_payload
from progressived.mqtt.publisher import PendingMessage


def event_outbox(topics: Topics, table_id: str, events: Sequence[Event]) -> OutboxFn:
    """The event messages of an engine append (one engine row per event, some unpublished)."""

    def build(rows: Sequence[JournalRow]) -> list[OutboxMessage]:
        out = []
        engine_rows = [r for r in rows if r.category == "engine"]
        for event, row in zip(events, engine_rows, strict=True):  # one row per event
            payload = event_payload(table_id, row.seq, event)
            if payload is not None:
                out.append(OutboxMessage(topics.event, dumps(payload), qos=1))
        return out

    return build


def system_outbox(topics: Topics, table_id: str, kind: str, detail: Mapping[str, Any]) -> OutboxFn:
    """The event message of a system, operator or parameter record."""

    def build(rows: Sequence[JournalRow]) -> list[OutboxMessage]:
        return [
            OutboxMessage(
                topics.event,
                dumps(system_payload(kind, table_id, row.seq, row.at, detail)),
                qos=1,
            )
            for row in rows
        ]

    return build


class LedgerOutbox:
    """The publisher's view of the ledger's outbox, read and acknowledged on the ledger thread."""

    def __init__(self, ledger: Ledger, executor: LedgerExecutor) -> None:
        self._ledger = ledger
        self._executor = executor

    async def pending(self, limit: int) -> Sequence[PendingMessage]:
        rows = await self._executor.run(self._ledger.outbox_pending, limit)
        return [PendingMessage(r.id, r.topic, r.payload, r.qos, r.retain, r.seq) for r in rows]

    async def ack(self, ids: Sequence[int]) -> None:
        await self._executor.run(self._ledger.outbox_ack, ids)

    async def ack_then_pending(self, ids: Sequence[int], limit: int) -> Sequence[PendingMessage]:
        rows = await self._executor.run(self._ack_then_read, ids, limit)
        return [PendingMessage(r.id, r.topic, r.payload, r.qos, r.retain, r.seq) for r in rows]

    def _ack_then_read(self, ids: Sequence[int], limit: int) -> list[OutboxRow]:
        """On the ledger thread: the last batch forgotten, then the next one read."""
        self._ledger.outbox_ack(ids)
        return self._ledger.outbox_pending(limit)
