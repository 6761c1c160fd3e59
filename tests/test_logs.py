"""structlog: JSON lines with syslog priority prefixes for journald; context on every line."""

from __future__ import annotations

import io
import json

import structlog

from progressived import logs


def test_json_lines_carry_a_priority_prefix_and_the_bound_context() -> None:
    out = io.StringIO()
    logs.configure("json", "info", stream=out)
    structlog.contextvars.bind_contextvars(table="tcp-07", round=12)
    try:
        log = structlog.get_logger("test")
        log.info("round locked", seats=[1, 3])
        log.error("ledger unavailable")
        log.debug("not shown at info")
    finally:
        structlog.contextvars.clear_contextvars()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("<6>{")
    assert lines[1].startswith("<3>{")
    first = json.loads(lines[0][3:])
    assert first["table"] == "tcp-07"
    assert first["round"] == 12
    assert first["event"] == "round locked"
    assert first["seats"] == [1, 3]
    assert first["timestamp"].endswith("Z")


def test_console_output_on_a_terminal_is_not_json() -> None:
    out = io.StringIO()
    logs.configure("console", "info", stream=out)
    structlog.get_logger("test").warning("board offline", table="t1")
    text = out.getvalue()
    assert "board offline" in text
    assert not text.startswith("<")
    logs.configure("json", "info")
