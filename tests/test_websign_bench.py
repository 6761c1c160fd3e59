"""bench/websign.py cannot rot: a tiny run (3 pages) must deliver every update to every page."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)


def test_the_websign_bench_runs_and_every_page_gets_every_update() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.websign", "--pages", "3", "--updates", "16"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["delivered_to_every_page"] is True, done.stderr
    assert result["pages"] == 3 and result["updates"] == 16
    assert result["rss_pages_mb"] > result["rss_floor_libraries_mb"] > 0
