"""Waiting for a condition, with a bound: the one wait of the rig, the tests and benchmarks.

A test that sleeps for an event is slow when the machine is idle and flaky when it is
loaded; a test that polls by hand tends to forget its bound or its message. ``until``
polls a check until it returns something true and returns that, or fails after
``timeout`` seconds saying what it waited for and what the check last returned::

    await until(lambda: len(sub.events("round_locked")) == 1, "the round locked")
    status = await until(read_status, "the link up", in_thread=True)  # a blocking check

``until_sync`` is the same for code outside an event loop (a subprocess's output, a file).
A check may be a coroutine function (its result is awaited) and may raise nothing but what
means a failure: it is not retried on an exception.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

T = TypeVar("T")
Falsy = Literal[False] | None  # what a check returns while the condition does not hold

DEFAULT_TIMEOUT_S = 15.0
DEFAULT_EVERY_S = 0.02


class WaitTimeout(AssertionError):
    """``until`` gave up: an assertion, so that pytest reports it as a test failure."""


def _failure(what: str, timeout: float, last: object) -> WaitTimeout:
    shown = repr(last)
    if len(shown) > 300:
        shown = shown[:300] + "..."
    return WaitTimeout(f"timed out after {timeout} s waiting for {what} (last seen: {shown})")


async def until(
    check: Callable[[], T | Falsy | Awaitable[T | Falsy]],
    what: str = "the condition",
    timeout: float = DEFAULT_TIMEOUT_S,
    *,
    every: float = DEFAULT_EVERY_S,
    in_thread: bool = False,
) -> T:
    """``check()``'s first true result, polled every ``every`` seconds for ``timeout``
    seconds at most. ``in_thread`` runs a blocking check (a socket request, a subprocess)
    in a thread so that the event loop, and the bound, keep running."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            got = await _checked(check, in_thread, max(deadline - time.monotonic(), 0.001))
        except TimeoutError:
            raise _failure(what, timeout, "the check itself did not return in time") from None
        if got:
            return got  # type: ignore[return-value]
        last = got
        if time.monotonic() >= deadline:
            raise _failure(what, timeout, last)
        await asyncio.sleep(every)


async def _checked(check: Callable[[], object], in_thread: bool, left: float) -> object:
    """One call of the check, bounded by the time ``left`` when it blocks or awaits."""
    got = await asyncio.wait_for(asyncio.to_thread(check), left) if in_thread else check()
    if inspect.isawaitable(got):
        got = await asyncio.wait_for(got, left)
    return got


def until_sync(
    check: Callable[[], T | Falsy],
    what: str = "the condition",
    timeout: float = DEFAULT_TIMEOUT_S,
    *,
    every: float = DEFAULT_EVERY_S,
) -> T:
    """:func:`until` for code with no event loop: blocks this thread while it polls."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise _failure(what, timeout, got)
        time.sleep(every)
