"""Prometheus metrics scraped from the running daemon and checked with promtool."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from progressived.testing.broker import free_port
from tests.daemon_harness import TABLE, table

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


async def test_metrics_from_the_running_daemon_pass_promtool(tmp_path: Path) -> None:
    port = free_port()
    async with table(tmp_path, metrics_port=str(port)) as t:
        t.start_daemon()
        await t.online()
        await t.bets(1, 3, 5)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        await t.collect(1, 3, 5)
        await t.press("S5", "H5", "S3", "H1")
        await t.sub.wait_event("award_keyed")
        t.sim.supervisor(True)
        await asyncio.sleep(0.2)
        await t.press("OK", "RECON")
        await t.sub.wait_event("round_reconciled")
        t.sim.supervisor(False)
        await t.press("H9")  # a key that makes no sense
        await t.sub.wait_event("key_refused")
        await asyncio.sleep(0.3)
        text = await asyncio.to_thread(scrape, port)

    got = samples(text)
    table_label = (("table", TABLE),)
    assert got[("progressive_in_total", table_label)] == 3
    assert (
        got[("progressive_meter_display_cents", (("meter", "main"), ("table", TABLE)))] == 100_006
    )
    assert got[("progressive_meter_reserve_cents", (("meter", "main"), ("table", TABLE)))] == 0
    assert (
        got[
            (
                "progressive_hits_total",
                (("hand", "akq-spades"), ("source", "meter"), ("table", TABLE)),
            )
        ]
        == 1
    )
    assert (
        got[
            (
                "progressive_wins_cents_total",
                (("hand", "akq-spades"), ("source", "envy"), ("table", TABLE)),
            )
        ]
        == 20_000
    )
    assert got[("progressive_paid_cents_total", (("by", "attendant"), ("table", TABLE)))] == 100_045
    assert (
        got[("progressive_paid_cents_total", (("by", "table"), ("table", TABLE)))] == 600 + 20_000
    )
    assert got[("progressive_rounds_total", (("outcome", "reconciled"), ("table", TABLE)))] == 1
    assert got[("progressive_board_online", table_label)] == 1
    assert got[("progressive_ledger_ok", table_label)] == 1
    assert got[("progressive_board_good_frames_total", table_label)] > 0
    # the same board counters as one labelled metric, equal to the per-counter ones
    board = {
        dict(labels)["counter"]: value
        for (name, labels), value in got.items()
        if name == "progressive_board_events_total"
    }
    assert {"good_frames", "crc_errors", "reconnects", "keys"} <= set(board)
    for counter, value in board.items():
        assert got[(f"progressive_board_{counter}_total", table_label)] == value
    assert board["keys"] >= 5
    assert got[("progressive_ledger_commit_seconds_count", table_label)] > 0
    assert got[("progressive_key_to_publish_seconds_count", table_label)] >= 1
    assert not any(name.endswith("_created") for name, _ in got)

    promtool = shutil.which("promtool")
    assert promtool, "promtool is installed by .ci/test (Debian package prometheus)"
    check = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip() == "" and check.stderr.strip() == "", check.stdout + check.stderr
