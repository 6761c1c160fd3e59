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


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """One real PostgreSQL server for the session (progressived/testing/postgres.py), on a
    free loopback port, stopped and removed at the end; each test takes a database of its
    own from it (``postgres_url``)."""
    from progressived.testing.postgres import server

    with server() as srv:
        yield srv


@pytest.fixture
def postgres_url(postgres_server: object) -> str:
    """A new empty database on the session's server: its URL (password from a passfile)."""
    from progressived.testing.postgres import Server

    assert isinstance(postgres_server, Server)
    return postgres_server.database()
