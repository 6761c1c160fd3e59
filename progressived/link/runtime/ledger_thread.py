"""The link ledger as the controller reaches it: one thread for every call, and what the
status says of its health.

Why one thread: the ledger (SQLite or PostgreSQL) blocks, and the event loop must not; its
calls are made one at a time, in order, off the loop. Why a part of its own: the commit,
the lease's renewals and the check of the ledger's file each learn something about the
ledger's health, and the status shows one ``ledger`` (ok, error).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from progressived.ledger import LedgerError
from progressived.link.core.ports import LinkJournal

T = TypeVar("T")
THREAD_NAME = "link-ledger"


class LedgerThread:
    """The ledger's one thread; replaced (not waited for) when a term is abandoned."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=THREAD_NAME)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the ledger thread, after every call queued before it."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args))

    async def close(self, journal: LinkJournal) -> None:
        """Close the ledger on its thread (releasing the lease); a fault closing it is
        not the stop's business."""
        with contextlib.suppress(LedgerError):
            await self.run(journal.close)

    def abandon(self, journal: LinkJournal) -> None:
        """The lease is lost: stand by on a fresh ledger thread. The old one may be stuck in
        a commit to a primary that froze (a stopped server never answers, and its kernel
        keeps the connection open), so nothing waits for it; it closes the old ledger
        whenever that call returns (the close's release matches only this term's token)."""
        old = self._executor
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=THREAD_NAME)
        old.submit(_close_quietly, journal)
        old.shutdown(wait=False)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True)


def _close_quietly(journal: LinkJournal) -> None:
    with contextlib.suppress(LedgerError):
        journal.close()


class LedgerHealth:
    """Whether the ledger takes writes (the status's ``ledger``, the ``ledger_ok`` gauge).

    ``error`` is why not (None: it does): a commit that found the ledger unavailable, the
    file gone from its path, or, on a standby, the database out of reach. ``file_problem``
    is why the ledger's path no longer names its open file ("": it does).
    """

    def __init__(self) -> None:
        self.error: str | None = None
        self.file_problem = ""

    def failed(self, error: str) -> bool:
        """The ledger refused a write; True if that is news (it was writable)."""
        news = self.error is None
        self.error = error
        return news

    def file_changed(self, problem: str) -> bool:
        """What is wrong with the ledger's file now ("": nothing); True if that changed."""
        changed = problem != self.file_problem
        self.file_problem = problem
        return changed

    def ok(self) -> bool:
        """The ledger took a write, or is reachable again; True if it was failing."""
        was = self.error is not None
        self.error = None
        return was
