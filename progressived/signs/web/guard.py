"""The web sign's listener bounds: how many connections, how long a request head may take,
how much a connection may hold in the kernel, and one log line per kind of trouble.

aiohttp bounds a request head's size but not its time, nor the number of connections, so
the sign server listens through :class:`GuardedProtocol`, a thin wrapper around aiohttp's
own protocol: over ``max_connections`` a new connection gets ``503`` with a short body and
is closed; a connection that has not delivered a whole request head ``head_timeout_s``
after it opened (or after its last response ended: an idle keep-alive) is closed. The
descriptor limit is checked at start so the cap stays below it: a new screen is refused
in words, never left without an answer at ``EMFILE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from progressived.runtime.ratelimit import RateLimitedLog

if TYPE_CHECKING:  # aiohttp is the web extra's: only the server module imports it at run time
    from aiohttp import web

__all__ = [
    "BUSY_RESPONSE",
    "DEFAULT_MAX_CONNECTIONS",
    "FD_RESERVE",
    "Guard",
    "GuardedProtocol",
    "Trouble",
    "TroubleLog",
    "connection_cap",
]

DEFAULT_MAX_CONNECTIONS = 1024  # pages and requests at once; LimitNOFILE=4096 leaves room
FD_RESERVE = 64  # descriptors kept for the broker, the log, the static files, Python itself
HEAD_TIMEOUT_S = 10.0  # a request head (or the next one on a keep-alive) within this
WRITE_TIMEOUT_S = 10.0  # one write to a page blocked longer than this: the page is dropped
SEND_BUFFER = 64 * 1024  # the kernel's send buffer per connection (not autotuned to MBs)
TROUBLE_EVERY_S = 60.0  # at most one line per kind of trouble in this window
BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
    b"Content-Length: 23\r\nRetry-After: 5\r\nConnection: close\r\n\r\n"
    b"sign server at its cap\n"
)


class Trouble(Enum):
    """The kinds of bad connection the server logs, one line per kind per window."""

    OVER_CAP = "connection refused: the sign server is at its connection cap"
    SLOW_HEAD = "connection closed: no request head within the time limit"
    SLOW_PAGE = "page dropped: it did not keep up with the stream"
    SERVER_LOG = "the HTTP server reported a problem"


@dataclass
class TroubleLog:
    """One line per :class:`Trouble` per ``every_s``, saying how many more were held back
    (the one log throttle, :class:`~progressived.runtime.ratelimit.RateLimitedLog`)."""

    say: Callable[[str], None]
    every_s: float = TROUBLE_EVERY_S
    clock: Callable[[], float] = time.monotonic
    _limit: RateLimitedLog = field(init=False)

    def __post_init__(self) -> None:
        self._limit = RateLimitedLog(1, self.every_s, clock=self.clock)

    def note(self, kind: Trouble, detail: str = "") -> bool:
        """Count one; say it if this kind was not said within ``every_s``."""
        held = self._limit.admit(kind)
        if held is None:
            return False
        more = f" ({held} more since the last line)" if held else ""
        self.say(f"sign: {kind.value}{f': {detail}' if detail else ''}{more}")
        return True


_LIBRARY_LOGGERS = ("aiohttp.server", "aiohttp.web", "asyncio")


class _OneLinePerKind(logging.Filter):
    """aiohttp's and asyncio's own error records (a traceback each) as rate-limited lines."""

    def __init__(self, trouble: TroubleLog) -> None:
        super().__init__()
        self.trouble = trouble

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            why = record.exc_info[1] if record.exc_info else None
            words = f"{record.getMessage()}{f' ({why!r})' if why is not None else ''}"
            self.trouble.note(Trouble.SERVER_LOG, words[:200])
        return False


def connection_cap(wanted: int) -> int:
    """``wanted``, lowered to the descriptors left after :data:`FD_RESERVE`; raises the soft
    descriptor limit to the hard one first (a unit's ``LimitNOFILE`` sets both)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, wanted + FD_RESERVE)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return max(1, min(wanted, soft - FD_RESERVE))


@dataclass
class Guard:
    """The listener's bounds and its count of open connections."""

    trouble: TroubleLog
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    head_timeout_s: float = HEAD_TIMEOUT_S
    open: dict[asyncio.BaseTransport, GuardedProtocol] = field(default_factory=dict)

    def quiet_library_logs(self) -> None:
        """Route aiohttp's and asyncio's error records through the trouble log (until
        :meth:`restore_library_logs`)."""
        only = _OneLinePerKind(self.trouble)
        for name in _LIBRARY_LOGGERS:
            logging.getLogger(name).addFilter(only)

    def restore_library_logs(self) -> None:
        for name in _LIBRARY_LOGGERS:
            logger = logging.getLogger(name)
            for found in [f for f in logger.filters if isinstance(f, _OneLinePerKind)]:
                if found.trouble is self.trouble:
                    logger.removeFilter(found)

    def factory(self, make: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: GuardedProtocol(self, make)

    def middleware(self) -> Callable[..., Awaitable[web.StreamResponse]]:
        """aiohttp's middleware: a whole head arrived, so no head deadline while the request
        is served; the next one (an idle keep-alive) has ``head_timeout_s`` again once this
        one ends. (Built here, marked as ``@web.middleware`` marks it, so that this module
        imports without aiohttp.)"""

        async def middleware(
            request: web.Request,
            handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
        ) -> web.StreamResponse:
            guarded = self.open.get(request.transport) if request.transport else None
            if guarded is not None:
                guarded.disarm()
            try:
                return await handler(request)
            finally:
                if guarded is not None:
                    guarded.arm()

        setattr(middleware, "__middleware_version__", 1)  # noqa: B010 (what @web.middleware sets)
        return middleware


class GuardedProtocol(asyncio.Protocol):
    """aiohttp's protocol for one connection, behind the cap and the head deadline."""

    def __init__(self, guard: Guard, make: Callable[[], asyncio.Protocol]) -> None:
        self.guard, self.make = guard, make
        self.inner: asyncio.Protocol | None = None
        self.transport: asyncio.Transport | None = None
        self.deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if len(self.guard.open) >= self.guard.max_connections:
            peer = transport.get_extra_info("peername")
            self.guard.trouble.note(Trouble.OVER_CAP, f"{self.guard.max_connections} open; {peer}")
            transport.write(BUSY_RESPONSE)
            transport.close()
            return
        sock = transport.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        self.guard.open[transport] = self
        self.inner = self.make()
        self.inner.connection_made(transport)
        self.arm()

    def arm(self) -> None:
        self.disarm()
        loop = asyncio.get_running_loop()
        self.deadline = loop.call_later(self.guard.head_timeout_s, self._too_slow)

    def disarm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _too_slow(self) -> None:
        self.deadline = None
        if self.transport is not None and not self.transport.is_closing():
            peer = self.transport.get_extra_info("peername")
            self.guard.trouble.note(Trouble.SLOW_HEAD, f"{self.guard.head_timeout_s:g}s; {peer}")
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        if self.transport is not None:
            self.guard.open.pop(self.transport, None)
        if self.inner is not None:
            self.inner.connection_lost(exc)
            self.inner = None


async def listen(
    runner: web.AppRunner, guard: Guard, host: str, port: int, **kwargs: Any
) -> asyncio.Server:
    """Listen on ``host:port`` with aiohttp's protocol behind ``guard``."""
    server = runner.server
    assert server is not None
    loop = asyncio.get_running_loop()
    return await loop.create_server(guard.factory(server), host, port, **kwargs)
