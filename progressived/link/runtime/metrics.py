"""Prometheus metrics of the link controller (all labelled ``link``).

Message counts, batch sizes and commit latency are counted as the controller works. The
rest is read at scrape time, on the endpoint's thread, from the controller's latest
:class:`~progressived.link.runtime.snapshot.ControllerSnapshot` and nothing else (the event
loop replaces it whole; it never changes under a scrape): meter amounts from the committed
book, exported in whole cents (a display of the ledger, never the ledger); which controller
serves (active or standby, since when, the lease's holder, token and expiry); the health
gauges and each table's share. A standby has no book, so it exports no meter, table or
``lseq`` gauge.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from progressived.core.money import cents
from progressived.link.runtime import views
from progressived.link.runtime.leadership import LeaseView
from progressived.link.runtime.snapshot import BookFigures, ControllerSnapshot, MeterFigures
from progressived.link.runtime.traffic import OUTCOMES
from progressived.runtime.metrics import LATENCY_BUCKETS, Endpoint

BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
Source = Callable[[], ControllerSnapshot]  # the latest published snapshot
_METERS: tuple[tuple[str, str, Callable[[MeterFigures], int]], ...] = (
    ("meter_display", "The linked meter (truncated to the cent).", lambda m: m.units),
    ("meter_reserve", "The linked meter's reserve.", lambda m: m.reserve),
    ("meter_overflow", "Contributions above the limit.", lambda m: m.overflow),
    ("meter_pending", "Claims priced, awaiting the supervisor.", lambda m: m.pending),
    ("meter_paid", "Claims confirmed paid.", lambda m: m.paid),
)


class _Scrape(Collector):
    def __init__(
        self,
        link: str,
        snapshot: Source,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.link = link
        self.snapshot = snapshot
        self.monotonic = monotonic

    def collect(self) -> Iterable[Any]:
        s = self.snapshot()  # one snapshot for the whole scrape
        if s.book is not None:  # a standby holds no book: the active controller's is news
            yield from self._book(s.book)
        yield from self._lease(s.lease)
        link = self.link
        for name, value in views.health(s, self.monotonic()).items():
            gauge = GaugeMetricFamily(
                f"progressive_link_{name}", name.replace("_", " "), labels=["link"]
            )
            gauge.add_metric([link], value)
            yield gauge

    def _lease(self, lead: LeaseView) -> Iterable[Any]:
        """Which controller serves: this one's role and since when, the lease as seen."""
        link = self.link
        since = GaugeMetricFamily(
            "progressive_link_role_since_seconds",
            "When this controller became active or standby (seconds since the epoch).",
            labels=["link", "role"],
        )
        since.add_metric([link, lead.role.value], lead.since)
        yield since
        changes = GaugeMetricFamily(
            "progressive_link_role_changes",
            "Takeovers and stand-downs of this controller since it started.",
            labels=["link"],
        )
        changes.add_metric([link], lead.changes)
        yield changes
        if lead.me is None:
            return  # a file: no lease
        holder = GaugeMetricFamily(
            "progressive_link_lease_token",
            "The lease's fencing token as last seen, labelled with its holder and this "
            "controller's name.",
            labels=["link", "holder", "me"],
        )
        holder.add_metric([link, lead.holder, lead.me], lead.token)
        yield holder
        expiry = GaugeMetricFamily(
            "progressive_link_lease_expires_seconds",
            "When the lease lapses unless renewed (seconds since the epoch, the database's "
            "clock as last seen).",
            labels=["link"],
        )
        expiry.add_metric([link], lead.expires_at or 0.0)
        yield expiry

    def _book(self, book: BookFigures) -> Iterable[Any]:
        link = self.link
        for name, doc, units in _METERS:
            family = GaugeMetricFamily(
                f"progressive_link_{name}_cents", doc, labels=["link", "meter"]
            )
            for meter_id, figures in book.meters.items():
                family.add_metric([link, meter_id], cents(units(figures)))
            yield family
        epoch = GaugeMetricFamily(
            "progressive_link_meter_epoch", "Claims and restores so far.", labels=["link", "meter"]
        )
        for meter_id, figures in book.meters.items():
            epoch.add_metric([link, meter_id], figures.epoch)
        yield epoch
        hwm = GaugeMetricFamily(
            "progressive_link_table_hwm",
            "Per member table: the last sequence applied.",
            labels=["link", "table"],
        )
        for table, seq in book.hwm.items():
            hwm.add_metric([link, table], seq)
        yield hwm
        lseq = GaugeMetricFamily(
            "progressive_link_lseq", "The link's log position.", labels=["link"]
        )
        lseq.add_metric([link], book.lseq)
        yield lseq


class _Fairness(Collector):
    """Each table's share, read at scrape time from :func:`views.fairness`'s dict: inbox
    drops, refusals by code, answers held back (docs/link.md, "Fair share")."""

    def __init__(self, link: str, snapshot: Source) -> None:
        self.link, self.snapshot = link, snapshot

    def collect(self) -> Iterable[Any]:
        now = views.fairness(self.snapshot())
        dropped = CounterMetricFamily(
            "progressive_link_inbox_dropped",
            "Messages dropped because their table's inbox lane was full (its outbox sends "
            "them again), per table.",
            labels=["link", "table"],
        )
        for table, n in now["inbox"]["dropped"].items():
            dropped.add_metric([self.link, table], n)
        yield dropped
        refusals = CounterMetricFamily(
            "progressive_link_refusals",
            "Messages refused without consuming a sequence (not journaled), per table and code.",
            labels=["link", "table", "code"],
        )
        for table, codes in now["refusals"].items():
            for code, n in codes.items():
                refusals.add_metric([self.link, table, code], n)
        yield refusals
        held = CounterMetricFamily(
            "progressive_link_answers_dropped",
            "Refusal and resend answers beyond their table's budget, not sent, per table.",
            labels=["link", "table"],
        )
        for table, n in now["answers_dropped"].items():
            held.add_metric([self.link, table], n)
        yield held


class LinkMetrics(Endpoint):
    """The registry, the counters the controller updates, and the HTTP endpoint."""

    def __init__(self, link: str, snapshot: Source) -> None:
        self.link = link
        self.registry = CollectorRegistry(auto_describe=True)
        self.messages = Counter(
            "progressive_link_messages",
            "Table messages by outcome (applied, refused, resend, duplicate).",
            ["link", "outcome"],
            registry=self.registry,
        )
        for outcome in OUTCOMES:
            self.messages.labels(self.link, outcome)
        self.unreadable = Counter(
            "progressive_link_unreadable",
            "Payloads refused before they were a message (seq 0: too large, too deep, not "
            "JSON, not the protocol's), by refusal code.",
            ["link", "code"],
            registry=self.registry,
        )
        self.batch = Histogram(
            "progressive_link_batch_size",
            "Messages per group commit.",
            ["link"],
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.commit = Histogram(
            "progressive_link_commit_seconds",
            "Time to commit one batch to the link ledger.",
            ["link"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_Scrape(self.link, snapshot))
        self.registry.register(_Fairness(self.link, snapshot))

    def count(self, counts: Mapping[str, int]) -> None:
        for outcome, n in counts.items():
            if n:
                self.messages.labels(self.link, outcome).inc(n)
