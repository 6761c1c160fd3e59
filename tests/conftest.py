"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAYTABLES = ROOT / "config" / "paytables"
RULES = ROOT.parent / "shared" / "rules"


@pytest.fixture
def paytables_dir() -> Path:
    return PAYTABLES
