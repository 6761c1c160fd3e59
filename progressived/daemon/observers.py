"""Who hears of the journal's writes, given to it at construction.

The journal decides and commits; what follows a commit (the outputs redraw, the publisher
wakes, hits, metrics and the key-to-publish latency are counted, each event is logged, the
tests and the demo are told) is here, in one place, so the journal's entry point reads as
decide -> append -> apply and nothing is wired into it after it is built.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from progressived.daemon.metrics import HitCounts, TableMetrics
from progressived.engine.events import Event

log = structlog.get_logger("progressived")

Notify = Callable[[str, Mapping[str, Any]], None]
"""Tells listeners (tests, the demo) what happened: ``applied``, ``rejected``, ``key``,
``published``, ``ready``."""


def _nothing() -> None:
    return None


class KeyLatency:
    """Key press -> the broker's acknowledgement of the first message it caused.

    The journal notes when the press behind each committed row arrived; the publisher's
    hook (this object is the publisher's :class:`~progressived.mqtt.publisher.PublisherHooks`)
    observes the time when a message carrying that row's ``seq`` is acknowledged.
    """

    LIMIT = 10_000  # rows remembered; a row never published is forgotten at this many

    def __init__(self, notify: Notify, observe: Callable[[float], None] | None = None) -> None:
        self._notify = notify
        self._observe = observe
        self._started: dict[int, float] = {}  # row seq -> perf_counter of the key press

    def committed(self, seqs: range, started: float) -> None:
        for seq in seqs:
            self._started[seq] = started
        if len(self._started) > self.LIMIT:
            self._started.clear()

    def published(self, topic: str, seq: int, first_seen: float | None) -> None:
        started = self._started.pop(seq, None)
        if started is not None and self._observe is not None:
            self._observe(time.perf_counter() - started)
        self._notify("published", {"topic": topic, "seq": seq, "first_seen": first_seen})


@dataclass(frozen=True, kw_only=True)
class JournalObservers:
    """What the journal tells after a commit or a refusal (all given at construction)."""

    table_id: str
    notify: Notify
    hits: HitCounts
    latency: KeyLatency
    metrics: TableMetrics | None = None
    changed: Callable[[], None] = _nothing
    """After every change of state or ledger health (the outputs redraw)."""
    queued: Callable[[], None] = _nothing
    """After a write that queued outbox messages (the publisher wakes)."""

    def committed(self, events: Sequence[Event], seqs: range, started: float | None) -> None:
        """A command's events journaled and taken: counted, timed, logged, told."""
        self.hits.count(events)
        if self.metrics is not None:
            self.metrics.count(events)
        if started is not None and seqs:
            # the first outbox message of this command carries one of these seqs
            self.latency.committed(seqs, started)
        for event in events:
            log.info(
                "event",
                kind=event.kind,
                table=self.table_id,
                round=event.round,
                seat=event.seat or None,
            )
        self.notify("applied", {"events": tuple(events)})

    def answered(self, events: Sequence[Event]) -> None:
        """The link's answer journaled: its events counted among the hits, and told."""
        self.hits.count(events)
        self.notify("applied", {"events": tuple(events)})

    def rejected(self, reason: str, code: str, command: str, round_no: int) -> None:
        """The engine (or a closed ledger) refused a command."""
        log.warning(
            "command rejected",
            reason=reason,
            code=code,
            command=command,
            table=self.table_id,
            round=round_no,
        )
        self.notify("rejected", {"reason": reason, "code": code})
        if self.metrics is not None:
            self.metrics.rejected.labels(self.table_id, code).inc()

    def commit_took(self, seconds: float) -> None:
        """One ledger transaction's time, for the commit histogram."""
        if self.metrics is not None:
            self.metrics.commit.labels(self.table_id).observe(seconds)
