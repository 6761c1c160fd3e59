"""The crash loop of tests/test_ledger_crash.py, at least 100 kills.

Run with ``.venv/bin/pytest tests/reliability/test_ledger_crash.py`` (the folder is
excluded from the default run). ``LEDGER_CRASH_KILLS`` sets the number of kills (default
100), ``LEDGER_CRASH_SEED`` the random seed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.reliability.rig import TALLY
from tests.test_ledger_crash import crash_loop

pytestmark = pytest.mark.reliability


@pytest.mark.timeout(3600)
def test_sigkill_loop(tmp_path: Path) -> None:
    kills = int(os.environ.get("LEDGER_CRASH_KILLS", "100"))
    seed = int(os.environ.get("LEDGER_CRASH_SEED", "20261121"))
    acked = crash_loop(tmp_path, kills, seed=seed)
    assert acked > 0
    TALLY["ledger_writer_sigkills"] += kills
    TALLY["ledger_writer_acks_checked"] += acked
