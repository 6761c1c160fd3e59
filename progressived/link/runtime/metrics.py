"""Prometheus metrics of the link controller (all labelled ``link``).

Meter amounts are read from the committed book at scrape time and exported in whole cents
(a display of the ledger, never the ledger); message counts, batch sizes and commit latency
are counted as the controller works.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from progressived.core.money import cents
from progressived.engine import accounts
from progressived.link.core import params as lp
from progressived.link.core.state import BookState
from progressived.runtime.metrics import LATENCY_BUCKETS, Endpoint

BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
OUTCOMES = ("applied", "refused", "resend", "duplicate")


class _Scrape(Collector):
    def __init__(
        self,
        params: lp.LinkParams,
        book: Callable[[], BookState],
        health: Callable[[], Mapping[str, float]],
    ) -> None:
        self.params = params
        self.book = book
        self.health = health

    def collect(self) -> Iterable[Any]:
        link = self.params.link_id
        state = self.book()
        for name, doc, account in (
            ("meter_display", "The linked meter (truncated to the cent).", accounts.meter),
            ("meter_reserve", "The linked meter's reserve.", accounts.reserve),
            ("meter_overflow", "Contributions above the limit.", accounts.overflow),
            ("meter_pending", "Claims priced, awaiting the supervisor.", accounts.pending),
            ("meter_paid", "Claims confirmed paid.", accounts.paid_attendant),
        ):
            family = GaugeMetricFamily(
                f"progressive_link_{name}_cents", doc, labels=["link", "meter"]
            )
            for spec in self.params.meters:
                family.add_metric([link, spec.id], cents(state.balances.get(account(spec.id), 0)))
            yield family
        epoch = GaugeMetricFamily(
            "progressive_link_meter_epoch", "Claims and restores so far.", labels=["link", "meter"]
        )
        for spec in self.params.meters:
            epoch.add_metric([link, spec.id], state.epochs.get(spec.id, 0))
        yield epoch
        hwm = GaugeMetricFamily(
            "progressive_link_table_hwm",
            "Per member table: the last sequence applied.",
            labels=["link", "table"],
        )
        for table in sorted(self.params.tables):
            track = state.tables.get(table)
            hwm.add_metric([link, table], 0 if track is None else track.hwm)
        yield hwm
        lseq = GaugeMetricFamily(
            "progressive_link_lseq", "The link's log position.", labels=["link"]
        )
        lseq.add_metric([link], state.lseq)
        yield lseq
        for name, value in self.health().items():
            gauge = GaugeMetricFamily(
                f"progressive_link_{name}", name.replace("_", " "), labels=["link"]
            )
            gauge.add_metric([link], value)
            yield gauge


class LinkMetrics(Endpoint):
    """The registry, the counters the controller updates, and the HTTP endpoint."""

    def __init__(
        self,
        params: lp.LinkParams,
        book: Callable[[], BookState],
        health: Callable[[], Mapping[str, float]],
    ) -> None:
        self.link = params.link_id
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
        self.registry.register(_Scrape(params, book, health))

    def count(self, counts: Mapping[str, int]) -> None:
        for outcome, n in counts.items():
            if n:
                self.messages.labels(self.link, outcome).inc(n)
