"""The link controller's status, health and metrics read one frozen snapshot
(progressived/link/runtime/snapshot.py), never its live parts.

The Prometheus endpoint scrapes on its own thread. It used to iterate the controller's
``heard`` dict while the event loop inserted into it (each batch) and cleared it (a
stand-down): ``RuntimeError: dictionary changed size during iteration``, a failed scrape.
Here the test plays the event loop on the main thread -- tables heard, forgotten, a
snapshot published after each change -- while another thread scrapes as the endpoint does,
with the interpreter switching threads as often as it can. In-process, no broker.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from progressived.link.runtime.config import link_config_from
from progressived.link.runtime.controller import LinkController
from progressived.link.runtime.snapshot import ControllerSnapshot
from tests.link_harness import link_data
from tests.link_ledger_stub import MemoryJournal

TABLES = [f"t{n}" for n in range(2000)]  # a dict this long takes a while to iterate
ROUNDS = 40


@pytest.fixture
def switching() -> Iterator[None]:
    """Threads switched every microsecond (the default is 5 ms): a race shows at once."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def controller(tmp_path: Path) -> LinkController:
    data = link_data(1, tmp_path, tables=TABLES)
    data["metrics"] = {"enabled": True, "port": 0}
    config = link_config_from(data, tmp_path / "link.toml")
    return LinkController(config, lambda: MemoryJournal(config.params))


def gauge(text: str, name: str) -> float:
    family = next(f for f in text_string_to_metric_families(text) if f.name == name)
    return float(family.samples[0].value)


@pytest.mark.usefixtures("switching")
def test_a_scrape_reads_the_snapshot_while_the_loop_hears_and_forgets_tables(
    tmp_path: Path,
) -> None:
    c = controller(tmp_path)
    metrics, traffic = c.parts.metrics, c.parts.traffic
    assert metrics is not None
    failures: list[BaseException] = []
    scrapes = 0
    done = threading.Event()

    def scrape() -> None:
        nonlocal scrapes
        while not done.is_set():
            try:
                metrics.exposition()
            except BaseException as exc:  # what the endpoint would have failed on
                failures.append(exc)
                return
            scrapes += 1

    thread = threading.Thread(target=scrape, name="metrics")
    thread.start()
    try:
        for _ in range(ROUNDS):
            traffic.batch({"applied": len(TABLES)}, TABLES, time.monotonic())
            c.publish()
            traffic.stood_down()  # a stand-down forgets every table heard
            c.publish()
    finally:
        done.set()
        thread.join(10)
    assert not thread.is_alive()
    assert failures == [], failures
    assert scrapes > 0
    traffic.batch({}, TABLES[:3], time.monotonic())
    stale = metrics.exposition().decode()
    assert gauge(stale, "progressive_link_tables_heard") == 0  # the published one: none heard
    c.publish()
    fresh = metrics.exposition().decode()
    assert gauge(fresh, "progressive_link_tables_heard") == 3


def test_a_snapshot_is_frozen_and_the_loop_changes_only_its_own_copy(tmp_path: Path) -> None:
    c = controller(tmp_path)
    c.parts.traffic.batch({"applied": 1}, ["t1"], time.monotonic())
    taken = c.publish()
    assert isinstance(taken, ControllerSnapshot)
    with pytest.raises(AttributeError):
        taken.batches = 0
    with pytest.raises(TypeError):
        taken.heard["t2"] = 0.0
    c.parts.traffic.batch({"applied": 1}, ["t2"], time.monotonic())
    c.parts.traffic.stood_down()
    assert set(taken.heard) == {"t1"} and taken.counts["applied"] == 1 and taken.batches == 1
    assert c.parts.snapshots.current is taken  # nothing published since
    status = c.status()  # the control socket's answer: a fresh snapshot
    assert status["messages"]["applied"] == 2 and status["batches"] == 2
    assert c.parts.snapshots.current is not taken
