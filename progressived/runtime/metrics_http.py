"""The HTTP server of the metrics endpoint (the table daemon's and the link controller's):
bounded in connections, in time and in request size.

prometheus_client's own server starts a thread per connection and waits on each for ever:
900 clients that connect and send nothing made 904 threads, and at 1,012 the daemon had no
file descriptor left for its control socket, its broker or its ledger. This one serves
every connection from one thread (its own asyncio loop, apart from the process's), so a
slow or hostile client costs one descriptor and a few kilobytes, never a thread, and only
while it is within these bounds (docs/operations.md, "Metrics"):

* at most :data:`MAX_CONNECTIONS` open at once, and at most :data:`MAX_PER_CLIENT` from one
  address (a client's share): one beyond is answered ``503`` and closed at once;
* the request head (request line and headers, at most :data:`MAX_REQUEST_BYTES`, else
  ``431``) must arrive within :data:`REQUEST_TIMEOUT_S`, else the connection is closed;
* the answer must be read within :data:`RESPONSE_TIMEOUT_S`, else the connection is closed;
* one request per connection (``Connection: close``).

The answer itself is prometheus_client's WSGI application (``make_wsgi_app``), as under its
own server: the same exposition, content negotiation (OpenMetrics, gzip, ``name[]``) and
statuses. Every kind of bad request is one warning line a minute at most (the number held
back is told with the next), never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import errno
import socket
import threading
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import structlog

from progressived.runtime.ratelimit import RateLimitedLog

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

log = structlog.get_logger("progressived.metrics")

MAX_CONNECTIONS = 64  # well below the units' LimitNOFILE=4096: the rest is the process's
MAX_PER_CLIENT = 8  # one address's share: a scraper needs one, a Prometheus pair two
REQUEST_TIMEOUT_S = 5.0  # the whole request head, however slowly it trickles in
RESPONSE_TIMEOUT_S = 10.0  # the whole answer read (Prometheus's default scrape timeout)
MAX_REQUEST_BYTES = 8 * 1024  # request line and headers; a scrape's are ~200 bytes
BACKLOG = 64  # connections the kernel queues before accept (no descriptor each)
REFUSAL_LOG_WINDOW_S = 60.0  # one line per kind of bad request in this window
STOP_TIMEOUT_S = 5.0
ACCEPT_RETRY_S = 1.0  # after an accept failed for want of descriptors (as asyncio's servers)
_NO_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class BadRequest(enum.Enum):
    """The kinds of connection the server refuses or closes; each its own log line."""

    SERVER_FULL = "metrics connection refused: the server is full"
    CLIENT_FULL = "metrics connection refused: this client has too many open"
    SLOW = "metrics connection closed: no whole request in time"
    TOO_LARGE = "metrics request refused: its head is too large"
    MALFORMED = "metrics request refused: not an HTTP request"
    STALLED = "metrics connection closed: the answer was not read in time"
    NO_DESCRIPTORS = "metrics connection not accepted: the process is out of descriptors"
    FAILED = "metrics request failed"


class MetricsServer:
    """``/metrics`` (any path, as prometheus_client) on ``address:port`` from one thread.

    :meth:`start` binds in the caller's thread (an ``OSError`` for an address that cannot
    be had), then serves in a daemon thread until :meth:`stop`.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        address: str,
        port: int,
        *,
        max_connections: int = MAX_CONNECTIONS,
        max_per_client: int = MAX_PER_CLIENT,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        response_timeout_s: float = RESPONSE_TIMEOUT_S,
    ) -> None:
        from prometheus_client import make_wsgi_app  # noqa: PLC0415 - progressivectl imports listen

        self._app = make_wsgi_app(registry)
        self.address, self.port = address, port
        self.max_connections, self.max_per_client = max_connections, max_per_client
        self.request_timeout_s, self.response_timeout_s = request_timeout_s, response_timeout_s
        self.open = 0  # connections being served now
        self._per_client: Counter[str] = Counter()
        self._said = RateLimitedLog(1, REFUSAL_LOG_WINDOW_S, logger=log)  # per kind
        self.refused: Counter[BadRequest] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._listening: socket.socket | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Bind and listen now, serve in a thread; the bound port."""
        family, _, _, _, sockaddr = socket.getaddrinfo(
            self.address, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
            sock.listen(BACKLOG)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.port = int(sock.getsockname()[1])
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(sock, ready), name="metrics-http", daemon=True
        )
        self._thread.start()
        ready.wait()
        return self.port

    def stop(self) -> None:
        """Close the listener and every connection; returns once the thread has ended."""
        loop, stopping, thread = self._loop, self._stopping, self._thread
        if loop is None or stopping is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop has already ended
            loop.call_soon_threadsafe(stopping.set)
        thread.join(STOP_TIMEOUT_S)

    # ------------------------------------------------------------------ the server's thread

    def _run(self, sock: socket.socket, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(self._loop_fault)
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(sock, ready))
        except Exception as exc:  # the metrics stop; the process (its table) plays on
            log.error("metrics server stopped", error=repr(exc))
            sock.close()
        finally:
            ready.set()
            loop.close()

    async def _serve(self, sock: socket.socket, ready: threading.Event) -> None:
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._listening = sock
        loop.add_reader(sock, self._accept)
        ready.set()
        await self._stopping.wait()
        loop.remove_reader(sock)
        sock.close()
        connections = list(self._tasks)
        for task in connections:  # each aborts its connection on the way out
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)

    def _accept(self) -> None:
        """Take what the kernel has queued: a connection beyond a bound is answered 503 and
        closed here and now, so a descriptor is held only by an admitted one (at most
        :data:`MAX_CONNECTIONS`), never by one waiting to be refused."""
        loop, listening = asyncio.get_running_loop(), self._listening
        assert listening is not None
        for _ in range(BACKLOG):
            try:
                conn, peer = listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and the like: wait a second, say it once
                kind = (
                    BadRequest.NO_DESCRIPTORS if exc.errno in _NO_DESCRIPTORS else BadRequest.FAILED
                )
                self._say(kind, error=exc.strerror)
                loop.remove_reader(listening)
                loop.call_later(ACCEPT_RETRY_S, self._resume)
                return
            client = str(peer[0]) if isinstance(peer, tuple) else "local"
            full = self._full(client)
            if full is not None:
                self._say(full, client=client, open=self.open)
                with contextlib.suppress(OSError):
                    conn.setblocking(False)
                    conn.send(_refusal("503 Service Unavailable", full.value))
                conn.close()
                continue
            self.open += 1
            self._per_client[client] += 1
            task = loop.create_task(self._connection(conn, client))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _resume(self) -> None:
        if (
            self._listening is not None
            and self._stopping is not None
            and not self._stopping.is_set()
        ):
            asyncio.get_running_loop().add_reader(self._listening, self._accept)

    def _loop_fault(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """asyncio's own faults: one line per kind a minute, no traceback."""
        self._say(BadRequest.FAILED, error=str(context.get("exception") or context.get("message")))

    def _say(self, kind: BadRequest, **fields: Any) -> None:
        self.refused[kind] += 1
        self._said.warning(kind.value, per=kind, kind=kind.name.lower(), **fields)

    async def _connection(self, conn: socket.socket, client: str) -> None:
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await asyncio.open_connection(sock=conn, limit=MAX_REQUEST_BYTES)
            await self._answer(reader, writer, client)
        except Exception as exc:  # a fault in here must cost one connection, not the server
            self._say(BadRequest.FAILED, client=client, error=repr(exc))
        finally:
            self.open -= 1
            self._per_client[client] -= 1
            if not self._per_client[client]:
                del self._per_client[client]
            if writer is None:
                conn.close()
            elif not writer.transport.is_closing():
                writer.transport.abort()  # timed out or failed: nothing more for this client

    def _full(self, client: str) -> BadRequest | None:
        if self.open >= self.max_connections:
            return BadRequest.SERVER_FULL
        if self._per_client[client] >= self.max_per_client:
            return BadRequest.CLIENT_FULL
        return None

    async def _answer(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client: str
    ) -> None:
        """Read one request head, write the answer and close; a connection left open here
        (a timeout) is aborted by the caller."""
        try:
            async with asyncio.timeout(self.request_timeout_s):
                head = await reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            self._say(BadRequest.SLOW, client=client, seconds=self.request_timeout_s)
            return
        except asyncio.LimitOverrunError:
            self._say(BadRequest.TOO_LARGE, client=client, limit=MAX_REQUEST_BYTES)
            _refuse(writer, "431 Request Header Fields Too Large", BadRequest.TOO_LARGE.value)
            return
        except asyncio.IncompleteReadError as exc:
            if exc.partial:  # a bare connect and close (a port check) is not worth a line
                self._say(BadRequest.MALFORMED, client=client, reason="closed mid-request")
            return
        environ = _environ(head)
        if environ is None:
            self._say(BadRequest.MALFORMED, client=client)
            _refuse(writer, "400 Bad Request", BadRequest.MALFORMED.value)
            return
        writer.transport.set_write_buffer_limits(high=0)  # drain() = all handed to the kernel
        writer.write(self._response(environ))
        try:
            async with asyncio.timeout(self.response_timeout_s):
                await writer.drain()
        except TimeoutError:
            self._say(BadRequest.STALLED, client=client, seconds=self.response_timeout_s)
            return
        except ConnectionError:
            return
        writer.close()  # everything is in the kernel's hands: a plain close

    def _response(self, environ: dict[str, Any]) -> bytes:
        """prometheus_client's WSGI application's answer, as HTTP/1.1 bytes."""
        started: list[str] = []
        headers: list[tuple[str, str]] = []

        def start_response(status: str, response_headers: list[tuple[str, str]], *_: Any) -> None:
            started.append(status)
            headers.extend(response_headers)

        chunks: Iterable[bytes] = self._app(environ, start_response)
        body = b"".join(chunks)
        lines = [f"HTTP/1.1 {started[0]}", *(f"{name}: {value}" for name, value in headers)]
        lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
        return "\r\n".join(lines).encode("latin-1") + body


def _environ(head: bytes) -> dict[str, Any] | None:
    """The WSGI environ of a request head (request line and headers), or None if it is not
    HTTP/1.x."""
    lines = head[: -len(b"\r\n\r\n")].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[2].startswith("HTTP/1."):
        return None
    method, target, version = parts
    path, _, query = target.partition("?")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": unquote(path),
        "QUERY_STRING": query,
        "SERVER_PROTOCOL": version,
        "wsgi.url_scheme": "http",
    }
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            return None
        environ["HTTP_" + name.upper().replace("-", "_")] = value.strip()
    return environ


def _refusal(status: str, why: str) -> bytes:
    body = f"{why}\n".encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


def _refuse(writer: asyncio.StreamWriter, status: str, why: str) -> None:
    """A short answer and a close; the few bytes fit any socket's buffer, nothing waits."""
    with contextlib.suppress(ConnectionError, RuntimeError):
        writer.write(_refusal(status, why))
    writer.close()
