"""The link controller's spans of one batch: where a table message's time goes at the link.

Why: the link's message -> answer budget (docs/performance.md, "The link's message ->
answer") needs each stage measured where it happens, as the table daemon's ``key journaled``
line does for a key press. One ``link batch`` line per batch, at **debug** level (a link at
full load runs hundreds of batches a second; an operator's log at ``info`` never sees them,
and a controller at ``info`` pays one level check per batch, nothing else):

* ``messages``; ``lseq`` / ``last_lseq``: the link log positions the batch consumed (0 when
  none), by which a table's result (it carries its ``lseq``) finds its batch;
* ``inbox_ms`` / ``inbox_max_ms``: the mean and longest wait of the batch's messages
  between the broker's delivery (the receive time the inbox stamped, wall clock, ms) and
  the batch's start;
* ``decode_ms`` (every payload to its message), ``book_ms`` (the book over the batch),
  ``commit_ms`` (the ledger thread: queue, transaction, fsync; 0 when nothing to commit),
  ``queue_ms`` (from the commit's return to the answers and meters queued for publishing).

The line is written once the answers are queued (its ``timestamp`` is that moment), off the
path it measures. ``bench/link_budget.py`` joins it with the bench's send and answer times.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from progressived.link.core.batch import Incoming, Outcome
from progressived.link.core.state import Applied

log = structlog.get_logger("progressived.link")


@dataclass(slots=True)
class BatchMarks:
    """The moments of one batch (``time.perf_counter``), stamped as it goes."""

    wall_ms: float = field(default_factory=lambda: time.time() * 1e3)  # the batch's start
    began: float = field(default_factory=time.perf_counter)
    decoded: float = 0.0
    booked: float = 0.0
    committed: float = 0.0

    def decode_done(self) -> None:
        self.decoded = time.perf_counter()

    def book_done(self) -> None:
        self.booked = self.committed = time.perf_counter()

    def commit_done(self) -> None:
        self.committed = time.perf_counter()


def enabled() -> bool:
    """Whether the spans are logged (the controller's log level is ``debug``)."""
    return bool(log.is_enabled_for(logging.DEBUG))


def log_batch(items: Sequence[Incoming], outcome: Outcome, marks: BatchMarks) -> None:
    """One ``link batch`` line (see the module); nothing below debug level."""
    if not items or not enabled():
        return
    now = time.perf_counter()
    lseqs = [e.lseq for step, _ in outcome.steps for e in step.events if isinstance(e, Applied)]
    waits = [marks.wall_ms - item.at_ms for item in items]
    log.debug(
        "link batch",
        messages=len(items),
        lseq=lseqs[0] if lseqs else 0,
        last_lseq=lseqs[-1] if lseqs else 0,
        inbox_ms=round(max(0.0, sum(waits) / len(waits)), 3),
        inbox_max_ms=round(max(0.0, *waits), 3),
        decode_ms=_ms(marks.began, marks.decoded),
        book_ms=_ms(marks.decoded, marks.booked),
        commit_ms=_ms(marks.booked, marks.committed),
        queue_ms=_ms(marks.committed, now),
    )


def _ms(start: float, end: float) -> float:
    return round(max(0.0, end - start) * 1e3, 3)
