"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from progressived.testing.broker import Mosquitto

ROOT = Path(__file__).resolve().parent.parent
PAYTABLES = ROOT / "config" / "paytables"
RULES = ROOT.parent / "shared" / "rules"


@pytest.fixture
def paytables_dir() -> Path:
    return PAYTABLES


@pytest.fixture
def mosquitto() -> Iterator[Mosquitto]:
    """A real Mosquitto on a free loopback port, stopped after the test."""
    with Mosquitto() as broker:
        yield broker
