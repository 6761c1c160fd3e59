"""structlog: JSON lines with syslog priority prefixes for journald; context on every line."""

from __future__ import annotations

import io
import json
import logging

import structlog

from progressived.runtime import logs


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


def _json_lines(text: str) -> list[dict[str, object]]:
    """Every line is ``<N>`` + one JSON object (fails on any other line)."""
    parsed = []
    for line in text.splitlines():
        assert line.startswith("<") and ">" in line[:4], f"no priority prefix: {line!r}"
        parsed.append(json.loads(line[line.index(">") + 1 :]))
    return parsed


def test_a_library_logging_through_the_stdlib_writes_json_lines_too() -> None:
    out = io.StringIO()
    logs.configure("json", "info", stream=out)
    try:
        logging.getLogger("mqtt").warning("There are %d pending publish calls.", 11)
        logging.getLogger("mqtt").debug("Sending PUBLISH (not shown: libraries log at info+)")
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("asyncio").exception("Task exception was never retrieved")
        structlog.get_logger("progressived").info("own line")
    finally:
        logs.configure("json", "info")
    lines = _json_lines(out.getvalue())
    by_event = {str(line["event"]): line for line in lines}
    pending = by_event["There are 11 pending publish calls."]
    assert pending["logger"] == "mqtt"
    assert pending["level"] == "warning"
    assert out.getvalue().startswith("<4>{")
    crash = by_event["Task exception was never retrieved"]
    assert crash["level"] == "error"
    assert "ValueError: boom" in str(crash["exception"])
    assert "own line" in by_event
    assert not any("Sending PUBLISH" in str(line["event"]) for line in lines)


def test_configure_twice_keeps_one_stdlib_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    logs.configure("json", "info", stream=first)
    logs.configure("json", "info", stream=second)
    try:
        logging.getLogger("some.library").warning("once")
    finally:
        logs.configure("json", "info")
    assert first.getvalue() == ""
    assert [line["event"] for line in _json_lines(second.getvalue())] == ["once"]
