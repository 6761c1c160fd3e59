"""The archive's Prometheus metrics (docs/archive.md, "Running it"), read at scrape time
from the service's counters (label ``archive``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from progressived.runtime.metrics import Endpoint


class _Session(Protocol):
    @property
    def connected(self) -> bool: ...


class _Lanes(Protocol):
    @property
    def dropped(self) -> Mapping[str, int]: ...


class _Head(Protocol):
    @property
    def seq(self) -> int: ...


class ArchiveView(Protocol):
    """What the metrics read of the service (a Protocol: the service imports this module,
    so this module names no class of the service's)."""

    @property
    def id(self) -> str: ...
    @property
    def active(self) -> bool: ...
    @property
    def database_ok(self) -> bool: ...
    @property
    def session(self) -> _Session: ...
    @property
    def stored_rows(self) -> int: ...
    @property
    def heads(self) -> Mapping[str, _Head]: ...
    @property
    def refusals(self) -> Mapping[tuple[str, str], int]: ...
    @property
    def lanes(self) -> _Lanes: ...


class _Collector(Collector):
    def __init__(self, service: ArchiveView) -> None:
        self.service = service

    def collect(self) -> Iterable[Any]:
        s = self.service
        name = [s.id]
        for key, doc, value in (
            ("active", "This process holds the archive's lease and serves.", s.active),
            ("database_ok", "The last database call succeeded.", s.database_ok),
            ("broker_connected", "Connected to the broker.", s.session.connected),
        ):
            gauge = GaugeMetricFamily(f"progressive_archive_{key}", doc, labels=["archive"])
            gauge.add_metric(name, int(value))
            yield gauge
        stored = CounterMetricFamily(
            "progressive_archive_rows_stored", "Rows stored since start.", labels=["archive"]
        )
        stored.add_metric(name, s.stored_rows)
        yield stored
        heads = GaugeMetricFamily(
            "progressive_archive_table_head_seq",
            "Each table's archived head.",
            labels=["archive", "table"],
        )
        for table, head in sorted(s.heads.items()):
            heads.add_metric([s.id, table], head.seq)
        yield heads
        refusals = CounterMetricFamily(
            "progressive_archive_refusals",
            "Runs of rows refused, by table and code, since start.",
            labels=["archive", "table", "code"],
        )
        for (table, code), count in sorted(s.refusals.items()):
            refusals.add_metric([s.id, table, code], count)
        yield refusals
        dropped = CounterMetricFamily(
            "progressive_archive_dropped",
            "Messages dropped from a full lane (the table sends them again), since start.",
            labels=["archive", "table"],
        )
        for table, count in sorted(s.lanes.dropped.items()):
            dropped.add_metric([s.id, table], count)
        yield dropped


class ArchiveMetrics(Endpoint):
    def __init__(self, service: ArchiveView) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(service))
