"""structlog set-up: JSON lines for journald (with syslog priority prefixes), colour on a tty.

journald reads a ``<N>`` prefix on a stdout line as that line's syslog priority, so the
JSON form starts each line with it; a terminal gets structlog's readable console output.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

SYSLOG_PRIORITY = {"debug": 7, "info": 6, "warning": 4, "error": 3, "critical": 2, "exception": 3}
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def _priority_prefix(_: Any, method: str, event: str | bytes) -> str:
    text = event.decode() if isinstance(event, bytes) else event
    return f"<{SYSLOG_PRIORITY.get(method, 6)}>{text}"


def configure(fmt: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Configure structlog once for the process. ``fmt``: auto, json or console."""
    out = stream or sys.stdout
    use_console = fmt == "console" or (fmt == "auto" and out.isatty())
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
    ]
    if use_console:
        processors.append(structlog.dev.ConsoleRenderer(colors=True))
    else:
        processors += [structlog.processors.JSONRenderer(sort_keys=True), _priority_prefix]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
