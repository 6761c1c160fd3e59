"""The pure subset of the suite: a newcomer's first feedback with pip alone.

``pytest -m pure`` runs the tests of the modules below: the engine, the meter book, the
ledger (real files), the configuration, the codecs and decoders, the PAR sheets, the link
book. They need no Debian package (no Mosquitto, PostgreSQL, Chromium, Patroni, etcd,
promtool, sqlite3 tool), no broker, database or browser, and start no process: conftest's
``pure_starts_no_process`` fails a ``pure`` test that starts one, so a module that begins
to need one is noticed and leaves the list. An ``e2e`` test of a listed module is not in
the subset. README.md ("Run all tests") and .ci/test's header give the command.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

PURE_MODULES = frozenset(
    {
        "test_backoff",
        "test_board_seats",
        "test_deck_guard",
        "test_engine",
        "test_engine_meter_port",
        "test_engine_shortcuts",
        "test_engine_stateful",
        "test_ha_config",
        "test_journal_observers",
        "test_keypad",
        "test_ledger",
        "test_ledger_event_text",
        "test_ledger_faults",
        "test_ledger_meter_conversion",
        "test_ledger_parameters",
        "test_ledger_snapshot",
        "test_ledger_split",
        "test_ledger_verify",
        "test_ledger_verify_fast",
        "test_ledger_verify_heads",
        "test_lifecycle",
        "test_link_book",
        "test_link_config",
        "test_link_inbox",
        "test_link_leadership",
        "test_link_message_models",
        "test_link_messages",
        "test_link_reconcile",
        "test_link_table_engine",
        "test_logs",
        "test_money",
        "test_mqtt_schema",
        "test_outside_decoders",
        "test_par_cli",
        "test_par_counts",
        "test_par_sheet",
        "test_paytable_names",
        "test_paytables",
        "test_protocol",
        "test_rules",
        "test_websign_docs",
        "test_websign_model",
        "test_websign_render",
        "test_wirejson",
    }
)


def mark(items: list[pytest.Item]) -> None:
    """Mark the tests of the pure modules ``pure`` (their ``e2e`` tests excepted)."""
    for item in items:
        module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
        if module in PURE_MODULES and item.get_closest_marker("e2e") is None:
            item.add_marker(pytest.mark.pure)


def refuse_processes(monkeypatch: pytest.MonkeyPatch, nodeid: str) -> None:
    """Make starting a process (``subprocess``, and asyncio's, which is built on it) fail
    the ``pure`` test ``nodeid`` with a line that says why."""

    def refused(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        raise AssertionError(
            f"{nodeid} is in the pure subset (tests/subsets.py), which starts no process; "
            f"it started {args!r}: take its module out of PURE_MODULES"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refused)
