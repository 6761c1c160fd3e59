"""The ledger's one thread: every call on the table's ledger runs here, one at a time.

SQLite waits for fsync on this thread, so the event loop keeps serving heartbeats, and the
one thread makes the journal the ledger's only writer. The daemon's parts are given this
executor (composition), none inherits it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import ParamSpec, TypeVar

from progressived.runtime.clock import JournalClock

P = ParamSpec("P")
T = TypeVar("T")


class LedgerExecutor:
    """Runs ledger calls on one dedicated thread, in the order they are queued."""

    def __init__(self, journal_clock: JournalClock) -> None:
        self.journal_clock = journal_clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn`` on the ledger thread.

        A write's time (its ``at``) is stamped here, as the call is queued: the one ledger
        thread runs calls in this order and gives rows their ``seq`` in it, so ``ts`` never
        runs backwards against ``seq`` whenever the caller read the clock.
        """
        if isinstance(kwargs.get("at"), str):
            kwargs["at"] = self.journal_clock.stamp(str(kwargs["at"]))
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, partial(fn, *args, **kwargs))

    def close(self) -> None:
        """Wait for the queued calls, then end the thread."""
        self._executor.shutdown(wait=True)
