"""The process lifecycle the table daemon and the link controller share.

Both run until SIGTERM (a requested stop, exit status 0) or SIGINT (an interruption, 130);
both are crash-only: a core task that ends on its own while nothing asked it to stops the
process with status 1, so that systemd (``Restart=always``) starts it again from the ledger
instead of it running on without the broker, the board or its loop. What each controller
adds (the link's lease lost, its fenced exit 5) is given here as ``quiet`` and :meth:`fail`.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any

import structlog

INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT (docs/operations.md, "Exit codes")
TASK_ENDED = 1  # a core task ended on its own (docs/operations.md, "Exit codes")


def _never() -> bool:
    return False


class Lifecycle:
    """One process's stop request, exit status and the watch over its core tasks."""

    def __init__(
        self,
        log: structlog.typing.FilteringBoundLogger,
        ended: str,
        *,
        quiet: Callable[[], bool] = _never,
    ) -> None:
        self.stop = asyncio.Event()
        """Set by a signal, :meth:`request_stop`, :meth:`fail` or a core task ending."""
        self.exit_status = 0
        self.interrupted = False
        self._log = log
        self._ended = ended  # the log line of a core task that ended on its own
        self._quiet = quiet  # a task ending then is expected (the link's lease lost)

    def install_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        """SIGTERM requests a stop; SIGINT an interruption (its status 130)."""
        loop.add_signal_handler(signal.SIGTERM, self.request_stop)
        loop.add_signal_handler(signal.SIGINT, self.request_stop, True)

    def request_stop(self, interrupted: bool = False) -> None:
        """Stop (SIGTERM); ``interrupted``: a Ctrl-C, whose exit status is 130."""
        self.interrupted = self.interrupted or interrupted
        self.stop.set()

    def fail(self, status: int) -> None:
        """Stop with ``status`` (a fault the process cannot run on with)."""
        self.exit_status = status
        self.stop.set()

    def watch(self, *tasks: asyncio.Task[Any]) -> None:
        """Crash-only: any of ``tasks`` ending on its own stops the process with status 1."""
        for task in tasks:
            task.add_done_callback(self._task_ended)

    def _task_ended(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or self.stop.is_set() or self._quiet():
            return
        self._log.error(self._ended, task=task.get_name(), error=repr(task.exception()))
        self.fail(TASK_ENDED)

    def status(self) -> int:
        """The exit status once stopped: a fault's, else 130 after a Ctrl-C, else 0."""
        if self.interrupted and self.exit_status == 0:
            return INTERRUPTED
        return self.exit_status
