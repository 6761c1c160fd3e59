"""MQTT message to pixels (bench/websign_pixels.py, the figure in docs/performance.md): a
bank of tables on one page in headless Chromium, each meter update timed from the moment it
is handed to the broker to the moment the frame that draws it has been painted (the
odometer set aside with ``prefers-reduced-motion``, as the target says). Target: p99 <= 100 ms,
judged by the benchmark (``python -m bench.websign_pixels``, docs/performance.md) on a machine
doing nothing else, not here: this test runs beside the rest of the suite, so it checks that
every update reaches the painted page, in order of the clocks, and judges no time (a bound
here failed once in CI at 2.9 s with the suite's other browsers and brokers beside it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.websign_pixels import TARGET_MS, measure

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)


async def test_every_message_reaches_the_painted_page(tmp_path: Path) -> None:
    report = await measure(200, tmp_path)
    print("websign message-to-pixels", json.dumps(report))
    assert report["reached_the_page"] == 200, report
    assert report["clock_ok"], "the page painted before the publish: clocks disagree"
    assert report["target_p99_ms"] == TARGET_MS  # the figure the benchmark judges
