"""structlog set-up: JSON lines for journald (with syslog priority prefixes), colour on a tty.

journald reads a ``<N>`` prefix on a stdout line as that line's syslog priority, so the
JSON form starts each line with it; a terminal gets structlog's readable console output.

Libraries log through the standard library (aiomqtt and paho as ``mqtt``, asyncio, ...).
Left alone, Python's last-resort handler prints their warnings as plain text on stderr,
which journald files next to our JSON ("There are 11 pending publish calls." during a
broker freeze). So the root logger gets one handler, on the same stream, whose
:class:`structlog.stdlib.ProcessorFormatter` renders every stdlib record through the same
processors as our own lines: every line of the daemon's output is ``<N>`` + one JSON
object, whoever logged it. Python warnings are captured into logging too.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

SYSLOG_PRIORITY = {
    "debug": 7,
    "info": 6,
    "warning": 4,
    "warn": 4,
    "error": 3,
    "critical": 2,
    "exception": 3,
}
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_HANDLER_NAME = "progressived-structlog"


def _priority_prefix(_: Any, method: str, event: str | bytes) -> str:
    text = event.decode() if isinstance(event, bytes) else event
    return f"<{SYSLOG_PRIORITY.get(method, 6)}>{text}"


def _stdlib_origin(
    _: Any, __: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A library's record names its logger (``logger``), like our own lines' context."""
    record = event_dict.get("_record")
    if isinstance(record, logging.LogRecord):
        event_dict.setdefault("logger", record.name)
    return event_dict


def _renderer(use_console: bool) -> list[Any]:
    if use_console:
        return [structlog.dev.ConsoleRenderer(colors=True)]
    return [structlog.processors.JSONRenderer(sort_keys=True), _priority_prefix]


def configure(fmt: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Configure structlog once for the process. ``fmt``: auto, json or console.

    Also routes the standard library's logging (every library's logger) through the same
    rendering, on the same stream, at the same level.
    """
    out = stream or sys.stdout
    use_console = fmt == "console" or (fmt == "auto" and out.isatty())
    threshold = LEVELS.get(level, logging.INFO)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
    ]
    structlog.configure(
        processors=[*shared, *_renderer(use_console)],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    _route_stdlib(out, threshold, shared, use_console)


def _route_stdlib(out: TextIO, threshold: int, shared: list[Any], use_console: bool) -> None:
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[_stdlib_origin, *shared],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *_renderer(use_console),
        ],
    )
    handler = logging.StreamHandler(out)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):  # configure() may run again (tests, the demo)
        if old.get_name() == _HANDLER_NAME:
            root.removeHandler(old)
    root.addHandler(handler)
    # Libraries at INFO at most: paho logs every packet at DEBUG, which would bury our own
    # debug lines (our loggers are structlog's and filter on ``threshold`` themselves).
    root.setLevel(max(threshold, logging.INFO))
    logging.captureWarnings(True)
