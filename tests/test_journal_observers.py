"""The journal's observers: the link's answer is counted and logged like a command's events.

An award the link confirms (``answered``) is journaled by the table like any other event, so
it must reach the hits, the Prometheus event counters and one ``event`` log line each, the
same as the events of a command the table decided itself (``committed``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from structlog.testing import capture_logs

from progressived.daemon.metrics import HitCounts, TableMetrics
from progressived.daemon.observers import JournalObservers, KeyLatency
from progressived.engine.events import AwardConfirmed, Event, WagerLocked

TABLE = "t1"


def _observers() -> tuple[JournalObservers, TableMetrics, list[str]]:
    told: list[str] = []

    def notify(what: str, _payload: Mapping[str, Any]) -> None:
        told.append(what)

    metrics = TableMetrics(TABLE)
    observers = JournalObservers(
        table_id=TABLE,
        notify=notify,
        hits=HitCounts(),
        latency=KeyLatency(notify),
        metrics=metrics,
    )
    return observers, metrics, told


def _confirmed() -> list[Event]:
    return [
        AwardConfirmed(
            at="2026-11-27T00:00:00Z",
            round=7,
            seat=3,
            hand="royal",
            meter="main",
            units=12_345,
            by="link",
        )
    ]


def _sample(metrics: TableMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, {"table": TABLE, **labels})
    return 0.0 if value is None else value


def test_the_links_answer_is_counted_in_the_prometheus_event_counters() -> None:
    observers, metrics, told = _observers()
    observers.answered(_confirmed())
    assert _sample(metrics, "progressive_awards_total", outcome="confirmed") == 1.0
    assert _sample(metrics, "progressive_pays_total", source="meter") == 1.0
    assert observers.hits.hits == {("royal", "meter"): 1}
    assert observers.hits.wins == {("royal", "meter"): 12_345}
    assert told == ["applied"]


def test_the_links_answer_is_logged_as_event_lines_like_a_commands() -> None:
    observers, _metrics, _told = _observers()
    with capture_logs() as answered_logs:
        observers.answered(_confirmed())
    with capture_logs() as committed_logs:
        observers.committed(_confirmed(), range(1, 2), None)
    assert answered_logs == committed_logs
    assert answered_logs == [
        {
            "event": "event",
            "kind": "award_confirmed",
            "table": TABLE,
            "round": 7,
            "seat": 3,
            "log_level": "info",
        }
    ]


def test_a_commands_events_are_still_counted_once() -> None:
    observers, metrics, _told = _observers()
    observers.committed(
        [WagerLocked(at="2026-11-27T00:00:00Z", round=1, seat=2, units=500)],
        range(1, 2),
        None,
    )
    assert _sample(metrics, "progressive_wagers_locked_total") == 1.0
    assert observers.hits.progressive_in == 1
