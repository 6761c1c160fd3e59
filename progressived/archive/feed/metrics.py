"""The table's archive metrics (docs/operations.md, "Metrics"), read at scrape time.

A collector of its own, registered on the table's registry beside the table's collector:
``progressive_archive_lag_rows``, ``progressive_archive_lag_seconds`` and
``progressive_archive_refused`` (label ``table``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from progressived.archive.feed.feed import ArchiveFeed


class ArchiveCollector(Collector):
    def __init__(self, table: str, feed: ArchiveFeed) -> None:
        self.table = table
        self.feed = feed

    def collect(self) -> Iterable[Any]:
        feed, labels = self.feed, [self.table]
        answer = feed.answer
        gauges = (
            (
                "lag_rows",
                "Ledger rows not yet stored by the archive (only on this board).",
                feed.lag_rows,
            ),
            (
                "lag_seconds",
                "Age of the oldest ledger row not yet stored by the archive (0 when none).",
                feed.lag_seconds,
            ),
            (
                "refused",
                "The archive refuses this table's rows (a broken or rewritten chain).",
                int(answer is not None and answer.status == "refused"),
            ),
        )
        for name, doc, value in gauges:
            family = GaugeMetricFamily(f"progressive_archive_{name}", doc, labels=["table"])
            family.add_metric(labels, value)
            yield family
