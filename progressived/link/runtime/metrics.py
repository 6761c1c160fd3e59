"""Prometheus metrics of the link controller (all labelled ``link``).

Meter amounts are read from the committed book at scrape time and exported in whole cents
(a display of the ledger, never the ledger); message counts, batch sizes and commit latency
are counted as the controller works. Which controller serves (active or standby, since
when, the lease's holder, token and expiry) is read from its
:class:`~progressived.link.runtime.leadership.Leadership` at scrape time; a standby has no
book, so it exports no meter, table or ``lseq`` gauge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from progressived.core.money import cents
from progressived.engine import accounts
from progressived.link.core import params as lp
from progressived.link.core.state import BookState
from progressived.link.runtime.leadership import Leadership
from progressived.runtime.metrics import LATENCY_BUCKETS, Endpoint

BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
OUTCOMES = ("applied", "refused", "resend", "duplicate")


class _Scrape(Collector):
    def __init__(
        self,
        params: lp.LinkParams,
        book: Callable[[], BookState | None],
        health: Callable[[], Mapping[str, float]],
        leadership: Leadership | None = None,
    ) -> None:
        self.params = params
        self.book = book
        self.health = health
        self.leadership = leadership

    def collect(self) -> Iterable[Any]:
        state = self.book()
        if state is not None:  # a standby holds no book: the active controller's is news
            yield from self._book(state)
        if self.leadership is not None:
            yield from self._lease(self.leadership)
        link = self.params.link_id
        for name, value in self.health().items():
            gauge = GaugeMetricFamily(
                f"progressive_link_{name}", name.replace("_", " "), labels=["link"]
            )
            gauge.add_metric([link], value)
            yield gauge

    def _lease(self, lead: Leadership) -> Iterable[Any]:
        """Which controller serves: this one's role and since when, the lease as seen."""
        link = self.params.link_id
        since = GaugeMetricFamily(
            "progressive_link_role_since_seconds",
            "When this controller became active or standby (seconds since the epoch).",
            labels=["link", "role"],
        )
        since.add_metric([link, lead.role], lead.since)
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

    def _book(self, state: BookState) -> Iterable[Any]:
        link = self.params.link_id
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


class _Fairness(Collector):
    """Each table's share, read at scrape time from :func:`views.fairness`'s dict: inbox
    drops, refusals by code, answers held back (docs/link.md, "Fair share")."""

    def __init__(self, link: str, fairness: Callable[[], Mapping[str, Any]]) -> None:
        self.link, self.fairness = link, fairness

    def collect(self) -> Iterable[Any]:
        now = self.fairness()
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

    def __init__(
        self,
        params: lp.LinkParams,
        book: Callable[[], BookState | None],
        health: Callable[[], Mapping[str, float]],
        leadership: Leadership | None = None,
        fairness: Callable[[], Mapping[str, Any]] | None = None,
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
        self.registry.register(_Scrape(params, book, health, leadership))
        if fairness is not None:
            self.registry.register(_Fairness(self.link, fairness))

    def count(self, counts: Mapping[str, int]) -> None:
        for outcome, n in counts.items():
            if n:
                self.messages.labels(self.link, outcome).inc(n)
