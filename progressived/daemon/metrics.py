"""Prometheus metrics for slot floor monitoring.

The regulators' meters (display value, reserve, overflow, pending, paid by the table and by
an attendant) are read from the engine's exact balances at scrape time, so they are never
out of step with the ledger; hits and wins per hand and progressive in are seeded from the
ledger at start and counted from then on. Amounts are exported in whole cents (the value a
sign shows) — Prometheus samples are floats, so they are only ever a display of the ledger.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from progressived.core.money import cents
from progressived.daemon.port import LinkStatus
from progressived.engine import TableState, accounts
from progressived.engine.events import (
    AwardConfirmed,
    AwardKeyed,
    AwardReversed,
    EnvyPaid,
    Event,
    RoundReconciled,
    RoundVoided,
    TrayPaid,
    WagerLocked,
    WagerRefunded,
)
from progressived.runtime.metrics import LATENCY_BUCKETS, Endpoint


@dataclass
class HitCounts:
    """Persistent per-hand hits and wins, progressive in (seeded from the ledger)."""

    progressive_in: int = 0
    hits: dict[tuple[str, str], int] = field(default_factory=dict)  # (hand, source) -> count
    wins: dict[tuple[str, str], int] = field(default_factory=dict)  # (hand, source) -> units
    lock: threading.Lock = field(default_factory=threading.Lock)

    def seed(self, report: Mapping[str, Any]) -> None:
        with self.lock:
            self.progressive_in += int(report.get("progressive_in", 0))
            for row in report.get("hands", []):
                key = (str(row["hand"]), str(row["source"]))
                self.hits[key] = self.hits.get(key, 0) + int(row["hits"])
                self.wins[key] = self.wins.get(key, 0) + int(row["units"])

    def reset(self, report: Mapping[str, Any]) -> None:
        """Count from ``report`` (the ledger's meters report) instead of what was counted."""
        fresh = HitCounts()
        fresh.seed(report)
        with self.lock:  # one swap: a scrape sees the old counts or the new, never a mix
            self.progressive_in, self.hits, self.wins = fresh.progressive_in, fresh.hits, fresh.wins

    def count(self, events: Iterable[Event]) -> None:
        with self.lock:
            for event in events:
                match event:
                    case WagerLocked():
                        self.progressive_in += 1
                    case WagerRefunded():
                        self.progressive_in -= 1
                    case AwardConfirmed(hand=hand, units=units):
                        self._hit(hand, "meter", units)
                    case TrayPaid(hand=hand, units=units):
                        self._hit(hand, "tray", units)
                    case EnvyPaid(hand=hand, units=units):
                        self._hit(hand, "envy", units)

    def _hit(self, hand: str, source: str, units: int) -> None:
        self.hits[(hand, source)] = self.hits.get((hand, source), 0) + 1
        self.wins[(hand, source)] = self.wins.get((hand, source), 0) + units


class _TableCollector(Collector):
    """Gauges and persistent counters computed at scrape time."""

    def __init__(self, source: MetricsSource) -> None:
        self.source = source

    def collect(self) -> Iterable[Any]:
        src = self.source
        table = src.table_id()
        state: TableState = src.state()
        balances = state.balances
        meter_ids = src.meter_ids()

        info = InfoMetricFamily("progressive", "the controller", labels=["table"])
        info.add_metric([table], src.info())
        yield info
        yield from _meter_families(table, balances, meter_ids)
        yield from _hit_families(table, src.hit_counts())
        yield from _board_families(table, src.board_counters())
        yield from _health_families(table, src)
        link = src.link()
        if link is not None:
            yield from _link_families(table, link)


def _meter_families(
    table: str, balances: Mapping[str, int], meter_ids: Sequence[str]
) -> Iterator[Any]:
    """The meters' gauges and the amounts paid, from the engine's exact balances."""

    def gauge(name: str, doc: str, account: Callable[[str], str]) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=["table", "meter"])
        for meter_id in meter_ids:
            family.add_metric([table, meter_id], cents(balances.get(account(meter_id), 0)))
        return family

    yield gauge(
        "progressive_meter_display_cents",
        "The meter as displayed (truncated to the cent).",
        accounts.meter,
    )
    yield gauge("progressive_meter_reserve_cents", "The reserve (hidden) pool.", accounts.reserve)
    yield gauge(
        "progressive_meter_overflow_cents",
        "Contributions above the meter's limit.",
        accounts.overflow,
    )
    yield gauge(
        "progressive_meter_pending_cents",
        "Meter awards awaiting the supervisor.",
        accounts.pending,
    )

    paid = CounterMetricFamily(
        "progressive_paid_cents",
        "Amounts paid, by the table (tray, envy) or by an attendant (meter).",
        labels=["table", "by"],
    )
    table_paid = balances.get(accounts.PAID_TRAY, 0) + balances.get(accounts.PAID_ENVY, 0)
    attendant = sum(balances.get(accounts.paid_attendant(m), 0) for m in meter_ids)
    paid.add_metric([table, "table"], cents(table_paid))
    paid.add_metric([table, "attendant"], cents(attendant))
    yield paid


def _hit_families(table: str, hits: HitCounts) -> Iterator[Any]:
    """Progressive in, hits and wins per hand and source (one consistent read)."""
    with hits.lock:
        pin = CounterMetricFamily(
            "progressive_in", "Progressive in: qualifying wagers.", labels=["table"]
        )
        pin.add_metric([table], hits.progressive_in)
        yield pin
        hit_family = CounterMetricFamily(
            "progressive_hits",
            "Winning hands paid, per hand and source.",
            labels=["table", "hand", "source"],
        )
        win_family = CounterMetricFamily(
            "progressive_wins_cents",
            "Amounts won, per hand and source.",
            labels=["table", "hand", "source"],
        )
        for (hand, source), count in sorted(hits.hits.items()):
            hit_family.add_metric([table, hand, source], count)
            win_family.add_metric([table, hand, source], cents(hits.wins[(hand, source)]))
        yield hit_family
        yield win_family


def _board_families(table: str, board: Mapping[str, int]) -> Iterator[Any]:
    """The board driver's counters: one family by counter, and the older names."""
    events = CounterMetricFamily(
        "progressive_board_events",
        "Board link counters, one series per driver counter.",
        labels=["table", "counter"],
    )
    for name in sorted(board):
        events.add_metric([table, name.removesuffix("_total")], board[name])
    yield events
    # The same counts under their older one-metric-per-counter names (the dashboard's).
    for name in sorted(board):
        metric = name.removesuffix("_total")
        family = CounterMetricFamily(
            f"progressive_board_{metric}", f"Board link counter {name}.", labels=["table"]
        )
        family.add_metric([table], board[name])
        yield family


def _health_families(table: str, src: MetricsSource) -> Iterator[Any]:
    """Health flags, the ledger's head and the publishes the broker refused."""
    for name, doc, value in src.health():
        health = GaugeMetricFamily(f"progressive_{name}", doc, labels=["table"])
        health.add_metric([table], 1 if value else 0)
        yield health
    head = GaugeMetricFamily(
        "progressive_ledger_head_seq", "The ledger's last sequence number.", labels=["table"]
    )
    head.add_metric([table], src.head_seq())
    yield head
    denied = CounterMetricFamily(
        "progressive_broker_publish_denied",
        "Publishes the broker refused (MQTT 5 PUBACK reason 0x80 and up: its ACL) since "
        "start; each is sent again, nothing is lost.",
        labels=["table"],
    )
    denied.add_metric([table], src.broker_denied_total())
    yield denied


LINK_METRICS = (
    "progressive_link_up",
    "progressive_link_closed",
    "progressive_link_heartbeat_age_seconds",
    "progressive_link_outbox_depth",
    "progressive_link_outbox_oldest_seconds",
    "progressive_link_resends_total",
    "progressive_link_refused",
    "progressive_link_unreadable_total",
)
"""A linked table's view of its link (labels ``table``, ``link``; docs/operations.md)."""


def _link_families(table: str, link: LinkStatus) -> Iterator[Any]:
    labels = [table, link.link_id]
    gauges = (
        ("up", "Heartbeats from the link are arriving.", 1 if link.up else 0),
        (
            "closed",
            "The linked meters are closed at this table (link-down, or the link refused it).",
            int(link.closed),
        ),
        (
            "heartbeat_age_seconds",
            "Seconds since the link's last heartbeat (since the start when none yet).",
            link.heartbeat_age_s,
        ),
        ("outbox_depth", "Messages awaiting the link's final result.", link.outbox_depth),
        (
            "outbox_oldest_seconds",
            "Age of the oldest message awaiting the link's result (0 when none).",
            link.outbox_oldest_s or 0.0,
        ),
    )
    for name, doc, value in gauges:
        family = GaugeMetricFamily(f"progressive_link_{name}", doc, labels=["table", "link"])
        family.add_metric(labels, value)
        yield family
    resends = CounterMetricFamily(
        "progressive_link_resends",
        "Times the outbox was sent again from a message (since start).",
        labels=["table", "link"],
    )
    resends.add_metric(labels, link.resends)
    yield resends
    # A refusal resending cannot cure: the linked progressive stays closed until an operator
    # opens it (docs/link.md, "Refusal codes").
    refused = GaugeMetricFamily(
        "progressive_link_refused",
        "The link refused this table in a way resending cannot cure: the linked meters are "
        "closed here until the configuration is fixed and an operator opens them.",
        labels=["table", "link"],
    )
    refused.add_metric(labels, int(link.refused is not None))
    yield refused
    unreadable = CounterMetricFamily(
        "progressive_link_unreadable",
        "Messages on the link's topics ignored as unreadable, by refusal code (since start).",
        labels=["table", "link", "code"],
    )
    for code, count in link.unreadable:
        unreadable.add_metric([*labels, code], count)
    yield unreadable


class MetricsSource(Protocol):
    """What the collector reads; the service implements it."""

    def table_id(self) -> str: ...
    def meter_ids(self) -> Sequence[str]: ...
    def state(self) -> TableState: ...
    def info(self) -> dict[str, str]: ...
    def hit_counts(self) -> HitCounts: ...
    def board_counters(self) -> Mapping[str, int]: ...
    def health(self) -> Sequence[tuple[str, str, bool]]: ...
    def head_seq(self) -> int: ...
    def broker_denied_total(self) -> int: ...
    def link(self) -> LinkStatus | None: ...


class TableMetrics(Endpoint):
    """The registry and the event-driven counters of one controller."""

    def __init__(self, table_id: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=False)
        labels = ["table"]
        self.table = table_id
        self.wagers = Counter(
            "progressive_wagers_locked",
            "Wagers locked since start.",
            labels,
            registry=self.registry,
        )
        self.awards = Counter(
            "progressive_awards",
            "Meter awards since start, by outcome.",
            [*labels, "outcome"],
            registry=self.registry,
        )
        self.envy = Counter(
            "progressive_envy_paid",
            "Envy bonuses paid since start.",
            labels,
            registry=self.registry,
        )
        self.pays = Counter(
            "progressive_pays",
            "Pays since start, by source.",
            [*labels, "source"],
            registry=self.registry,
        )
        self.rounds = Counter(
            "progressive_rounds",
            "Rounds ended since start, by outcome.",
            [*labels, "outcome"],
            registry=self.registry,
        )
        self.rejected = Counter(
            "progressive_commands_rejected",
            "Commands rejected since start, by code.",
            [*labels, "code"],
            registry=self.registry,
        )
        self.commit = Histogram(
            "progressive_ledger_commit_seconds",
            "Time to commit one ledger transaction.",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.key_to_publish = Histogram(
            "progressive_key_to_publish_seconds",
            "From a key press received to the broker acknowledging its first message.",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def collect(self, source: MetricsSource) -> None:
        """Read the gauges and persistent counters from ``source`` at each scrape.

        Separate from construction: the counters above are the journal's observers (built
        before it), while ``source`` reads parts built after it (the link client's status).
        """
        self.registry.register(_TableCollector(source))

    def count(self, events: Iterable[Event]) -> None:
        t = self.table
        for event in events:
            match event:
                case WagerLocked():
                    self.wagers.labels(t).inc()
                case AwardKeyed():
                    self.awards.labels(t, "keyed").inc()
                case AwardConfirmed():
                    self.awards.labels(t, "confirmed").inc()
                    self.pays.labels(t, "meter").inc()
                case AwardReversed(reason=reason):
                    self.awards.labels(t, reason).inc()
                case TrayPaid():
                    self.pays.labels(t, "tray").inc()
                case EnvyPaid():
                    self.envy.labels(t).inc()
                    self.pays.labels(t, "envy").inc()
                case RoundReconciled():
                    self.rounds.labels(t, "reconciled").inc()
                case RoundVoided():
                    self.rounds.labels(t, "voided").inc()
