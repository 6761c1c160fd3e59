"""The web sign's listener under hostile clients (docs/sign.md, "Limits"): the real server
(``serve``) in process against a real Mosquitto and raw loopback sockets. A page that stops
reading is closed, a connection that never finishes its request head is closed, a
connection over the cap is refused in words, ``HEAD /events`` ends, and each kind of trouble
is one line, not one per connection.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import aiomqtt
import pytest

from progressived.signs.broker import BrokerLogin
from progressived.signs.web.guard import Guard, TroubleLog
from progressived.signs.web.server import _CLIENT_BACKLOG, SignServer, serve
from progressived.testing.broker import Mosquitto, free_port
from progressived.testing.waits import until

pytestmark = pytest.mark.e2e  # a real broker and real sockets


@asynccontextmanager
async def running(mosquitto: Mosquitto, **options: Any) -> AsyncIterator[tuple[SignServer, int]]:
    """``serve`` on a free loopback port, following the test's broker; stopped after."""
    sign = SignServer(
        BrokerLogin(port=mosquitto.port), tables=("t1",), err=io.StringIO(), **options
    )
    port, ready = free_port(), asyncio.Event()
    task = asyncio.create_task(serve(sign, "127.0.0.1", port, ready))
    try:
        await until(lambda: ready.is_set() or task.done(), "the sign listening")
        await until(lambda: sign.broker == "connected", "the sign connected to the broker")
        yield sign, port
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


async def connect(port: int, rcvbuf: int | None = None) -> tuple[asyncio.StreamReader, Any]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return await asyncio.open_connection(sock=sock, limit=1024)


async def closed_by_server(reader: asyncio.StreamReader, within_s: float = 15.0) -> bytes:
    """Everything up to the server closing the connection (EOF or a reset)."""
    got = b""

    async def drain() -> None:
        nonlocal got
        with suppress(ConnectionError):
            while chunk := await reader.read(65536):
                got += chunk

    await asyncio.wait_for(drain(), within_s)
    return got


async def test_a_page_that_stops_reading_is_closed_and_its_queue_stays_bounded(
    mosquitto: Mosquitto,
) -> None:
    async with running(mosquitto, write_timeout_s=60.0) as (sign, port):
        reader, writer = await connect(port, rcvbuf=4096)
        writer.write(b"GET /events HTTP/1.1\r\nHost: sign\r\n\r\n")
        await reader.readuntil(b"\r\n\r\n")  # the headers; then it reads nothing more
        await until(lambda: len(sign.clients) == 1, "the page subscribed")
        async with aiomqtt.Client("127.0.0.1", mosquitto.port) as client:
            for seq in range(1, 3001):
                body = {"cents": seq * 100 + 7, "display": "$0.00", "seq": seq, "state": "open",
                        "table": "t1", "meter": "main"}  # fmt: skip
                await client.publish("progressive/table/t1/meter/main", json.dumps(body), qos=0)
                assert all(q.qsize() <= _CLIENT_BACKLOG for q in sign.clients)
                if not sign.clients and seq > 10:
                    break
        await until(lambda: not sign.clients, "the slow page dropped")
        await closed_by_server(reader)  # its connection too, not only its queue
        writer.close()
        assert "page dropped" in sign.err.getvalue()


async def test_a_request_head_that_never_ends_is_closed_and_said_once(
    mosquitto: Mosquitto,
) -> None:
    async with running(mosquitto, head_timeout_s=0.5) as (sign, port):
        slow = [await connect(port) for _ in range(5)]
        for _, writer in slow:
            writer.write(b"GET / HTTP/1.1\r\nHost: sign\r\n")  # and never the blank line
        for reader, writer in slow:
            assert await closed_by_server(reader) == b""
            writer.close()
        said = sign.err.getvalue()
        assert said.count("no request head") == 1, said
        # A browser that sends its head in time is served as before.
        reader, writer = await connect(port)
        writer.write(b"GET /state.json HTTP/1.1\r\nHost: sign\r\nConnection: close\r\n\r\n")
        assert (await closed_by_server(reader)).startswith(b"HTTP/1.1 200")
        writer.close()


async def test_over_the_connection_cap_a_new_connection_is_refused_in_words(
    mosquitto: Mosquitto,
) -> None:
    async with running(mosquitto, max_connections=2) as (sign, port):
        held = [await connect(port) for _ in range(2)]
        await until(lambda: len(sign.clients) + 2 > 0, "the two connections")
        refused = []
        for _ in range(3):
            reader, writer = await connect(port)
            writer.write(b"GET / HTTP/1.1\r\nHost: sign\r\n\r\n")
            refused.append(await closed_by_server(reader))
            writer.close()
        assert all(r.startswith(b"HTTP/1.1 503") and r.endswith(b"at its cap\n") for r in refused)
        said = sign.err.getvalue()
        assert said.count("connection cap") == 1, said
        for _, writer in held:
            writer.close()


async def test_head_of_the_event_stream_answers_with_headers_only(mosquitto: Mosquitto) -> None:
    async with running(mosquitto) as (_, port):
        reader, writer = await connect(port)
        writer.write(b"HEAD /events HTTP/1.1\r\nHost: sign\r\nConnection: close\r\n\r\n")
        answer = await closed_by_server(reader, within_s=10)
        writer.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head
        assert body == b""


def test_the_http_servers_own_errors_are_one_line_per_kind_not_a_traceback_each() -> None:
    said: list[str] = []
    guard = Guard(TroubleLog(said.append))
    guard.quiet_library_logs()
    try:
        for _ in range(1000):  # e.g. asyncio's "socket.accept() out of system resource"
            try:
                raise OSError(24, "Too many open files")
            except OSError:
                logging.getLogger("asyncio").error("socket.accept() failed", exc_info=True)
    finally:
        guard.restore_library_logs()
    assert len(said) == 1 and "Traceback" not in said[0], said
    assert said[0].startswith("sign: the HTTP server reported a problem: socket.accept() failed")
    assert not logging.getLogger("asyncio").filters  # given back when the server stops
