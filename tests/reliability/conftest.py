"""Prints the reliability tally at the end of the session (and writes it as JSON to
``$RELIABILITY_REPORT`` when set): the figures docs/reliability.md reports."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.reliability.rig import NOTES, SHORT, TALLY, write_report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TALLY:
        return
    terminalreporter.section(f"reliability tally ({'short' if SHORT else 'full'})")
    for name, value in sorted(TALLY.items()):
        terminalreporter.write_line(f"{name:<32} {value:>10,}")
    for note in NOTES:
        terminalreporter.write_line(f"note: {note}")
    target = os.environ.get("RELIABILITY_REPORT")
    if target:
        write_report(Path(target))
