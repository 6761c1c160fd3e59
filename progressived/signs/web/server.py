"""The web sign's server: one read-only MQTT subscription, many browsers over SSE.

aiohttp serves the page and a server-sent-event stream (``/events``). Every browser gets a
full snapshot when it connects (so a reload, a dropped connection or a restarted server
needs no replay), then each changed source as it changes, and a ``tick`` every second with
the broker's state, so the page can tell "nothing happened" from "nothing is arriving"
(docs/sign.md, the stale rule). A browser too slow to keep up is dropped and reconnects to
a fresh snapshot rather than being buffered without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import aiomqtt
from aiohttp import web

from progressived.mqtt.client import Ending
from progressived.mqtt.session import MqttSession
from progressived.signs.broker import EXIT_NOT_AUTHORISED, BrokerLogin, NotAuthorised
from progressived.signs.events import IgnoredLog
from progressived.signs.web import DEFAULT_PORT
from progressived.signs.web.guard import (
    DEFAULT_MAX_CONNECTIONS,
    HEAD_TIMEOUT_S,
    WRITE_TIMEOUT_S,
    Guard,
    Trouble,
    TroubleLog,
    connection_cap,
    listen,
)
from progressived.signs.web.look import SignConfig
from progressived.signs.web.model import Floor
from progressived.signs.web.render import page_html, placeholder, source_html

__all__ = ["DEFAULT_PORT", "SignServer", "serve", "sse"]

STATIC = Path(__file__).parent / "static"
TICK_S = 1.0  # the page calls the sign STALE after 3 ticks without a word from the server
_CLIENT_BACKLOG = 256  # messages queued for one browser before it is dropped


def sse(event: str, data: Any, ident: int | None = None) -> bytes:
    """One server-sent event (the payload is one JSON line)."""
    head = f"id: {ident}\n" if ident is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


@dataclass
class SignServer:
    """The floor picture, the MQTT loop that feeds it, and the browsers it is pushed to."""

    login: BrokerLogin
    prefix: str = "progressive"
    tables: tuple[str, ...] = ()  # the tables shown (named in the configuration): only these
    links: tuple[str, ...] = ()  # linked meters shown (docs/link.md); none unless asked for
    banner_s: float = 30.0
    keepalive_s: int = 5
    reconnect_s: float = 1.0
    floor: Floor = field(init=False)
    broker: str = "connecting"  # connecting / connected / unreachable / not authorised
    broker_detail: str = ""
    # Each page's queue and its connection: a page that falls _CLIENT_BACKLOG behind, or
    # whose write blocks write_timeout_s, is closed (it reconnects to a fresh snapshot).
    clients: dict[asyncio.Queue[bytes | None], asyncio.BaseTransport | None] = field(
        default_factory=dict
    )
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    head_timeout_s: float = HEAD_TIMEOUT_S
    write_timeout_s: float = WRITE_TIMEOUT_S
    trouble: TroubleLog = field(init=False)
    sent: int = 0
    err: TextIO = sys.stderr
    config: SignConfig = field(default_factory=SignConfig)  # names, paytables, colours
    clock: Callable[[], float] = time.monotonic  # banners' ends, lines said at most so often
    ignored: IgnoredLog = field(init=False)  # malformed messages, said on ``err``

    def __post_init__(self) -> None:
        named = [f"table/{t}" for t in self.tables] + [f"link/{k}" for k in self.links]
        self.floor = Floor(self.prefix, self.banner_s, named=frozenset(named))
        self.trouble = TroubleLog(self._say, clock=self.clock)
        self.ignored = IgnoredLog(self._say, clock=self.clock)

    def _say(self, line: str) -> None:
        print(line, file=self.err)
        self.err.flush()

    def topics(self) -> list[str]:
        """Status first (a new boot restarts the seq expectation), then meters, events."""
        # Only the tables shown, never a wildcard: the broker then neither delivers nor queues
        # a message for a table the sign does not show (a flood there costs the sign nothing).
        ids = self.tables
        topics = [
            f"{self.prefix}/table/{ident}/{leaf}"
            for leaf in ("status", "meter/+", "event")
            for ident in ids
        ]
        # A linked meter is the link's retained topic only (signs may read nothing else).
        return topics + [f"{self.prefix}/link/{link}/meter/+" for link in self.links]

    def broker_json(self) -> dict[str, Any]:
        return {"state": self.broker, "detail": self.broker_detail, "url": self.login.url}

    def sources(self, now: float, waiting: bool = True) -> list[dict[str, Any]]:
        """Every source heard of, and (``waiting``) those shown that are not heard yet."""
        heard = self.floor.snapshot(now)
        if not waiting:
            return heard
        keys = {s["key"] for s in heard}
        shown = [("table", t) for t in self.tables] + [("link", k) for k in self.links]
        unheard = [placeholder(k, i) for k, i in shown if f"{k}/{i}" not in keys]
        return sorted(heard + unheard, key=lambda s: str(s["key"]))

    def snapshot(self, html: bool = False) -> dict[str, Any]:
        """The picture: with ``html`` (the stream's), also the sources shown but not heard
        of yet, each drawn; without (``/state.json``), what the broker said."""
        now = self.clock()
        sources = self.sources(now, waiting=html)
        if html:
            sources = [{**s, "html": source_html(s, self.config)} for s in sources]
        return {
            "broker": self.broker_json(),
            "sources": sources,
            "banner_s": self.banner_s,
            "tick_s": TICK_S,
            "odometer_ms": self.config.odometer_ms,
        }

    def push(self, event: str, data: Any) -> None:
        """Queue one event for every connected browser; drop those that cannot keep up."""
        self.sent += 1
        frame = sse(event, data, self.sent)
        for queue, transport in list(self.clients.items()):
            try:
                queue.put_nowait(frame)
            except asyncio.QueueFull:
                self.drop(queue, transport, f"{queue.qsize()} messages behind")

    def drop(
        self, queue: asyncio.Queue[bytes | None], transport: asyncio.BaseTransport | None, why: str
    ) -> None:
        """Close a page that cannot keep up: its connection at once (its writer may be
        blocked on a full socket, so ending its queue alone would not free anything)."""
        self.clients.pop(queue, None)
        self.trouble.note(Trouble.SLOW_PAGE, why)
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait(None)
        if isinstance(transport, asyncio.Transport):
            transport.abort()

    def set_broker(self, state: str, detail: str = "") -> None:
        if (state, detail) != (self.broker, self.broker_detail):
            self.broker, self.broker_detail = state, detail
            self.push("broker", self.broker_json())

    def take(self, topic: str, payload: bytes) -> None:
        now = self.clock()
        key = self.floor.receive(topic, payload, now)
        if key is not None:
            shown = self.floor.sources[key].as_json(now)
            self.push("source", {**shown, "html": source_html(shown, self.config)})
        elif self.floor.problem:
            self.ignored.ignored(topic, self.floor.problem)

    async def follow_broker(self) -> int:
        """Subscribe and feed the floor for ever; returns only when the login is refused."""
        options = self.login.options(
            keepalive_s=self.keepalive_s,
            timeout_s=max(2.0, 2.0 * self.keepalive_s),
            reconnect_s=self.reconnect_s,
        )
        session = MqttSession(options, observers=[_BrokerState(self)], give_up_refused=True)

        async def take(message: aiomqtt.Message) -> None:
            payload = message.payload
            if isinstance(payload, (bytes, bytearray)):
                self.take(str(message.topic), bytes(payload))

        for topic in self.topics():
            session.subscribe(topic, take)
        try:
            await session.run()
        except NotAuthorised:
            return EXIT_NOT_AUTHORISED
        return 0

    # HTTP ---------------------------------------------------------------------------

    async def page(self, request: web.Request) -> web.Response:
        """The page, drawn with what the server already holds (its first frame is right)."""
        kind = request.match_info.get("kind", "")
        only = f"{kind}/{request.match_info['id']}" if kind else ""
        html = page_html(self.config, self.sources(self.clock()), self.broker_json(), only)
        return web.Response(
            text=html, content_type="text/html", headers={"Cache-Control": "no-cache"}
        )

    async def logo(self, request: web.Request) -> web.Response:
        if not self.config.logo:
            raise web.HTTPNotFound()
        return web.Response(body=self.config.logo, content_type=self.config.logo_type)

    async def state(self, request: web.Request) -> web.Response:
        return web.json_response(self.snapshot())

    async def events(self, request: web.Request) -> web.StreamResponse:
        headers = {
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
        if request.method == "HEAD":  # the headers a GET would get, and no endless body
            return web.Response(headers=headers)
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(_CLIENT_BACKLOG)
        self.clients[queue] = request.transport
        try:
            first = sse("snapshot", self.snapshot(html=True), self.sent)
            await self._write(response, queue, b"retry: 1000\n\n" + first)
            while True:
                try:
                    frame = await asyncio.wait_for(queue.get(), TICK_S)
                except TimeoutError:
                    frame = sse("tick", self.broker_json())
                if frame is None:
                    break
                await self._write(response, queue, frame)
        except (ConnectionResetError, ConnectionError, _Dropped):
            pass
        finally:
            self.clients.pop(queue, None)
        return response

    async def _write(
        self, response: web.StreamResponse, queue: asyncio.Queue[bytes | None], frame: bytes
    ) -> None:
        """One write to a page, given up (and the page dropped) after write_timeout_s."""
        try:
            await asyncio.wait_for(response.write(frame), self.write_timeout_s)
        except TimeoutError:
            transport = self.clients.get(queue)
            self.drop(queue, transport, f"a write blocked {self.write_timeout_s:g}s")
            raise _Dropped from None

    def app(self, guard: Guard | None = None) -> web.Application:
        app = web.Application(middlewares=[guard.middleware()] if guard is not None else [])
        app.router.add_get("/", self.page)
        app.router.add_get("/{kind:table|link}/{id}", self.page)
        app.router.add_get("/logo", self.logo)
        app.router.add_get("/events", self.events)
        app.router.add_get("/state.json", self.state)
        app.router.add_static("/static/", STATIC)
        return app


class _Dropped(Exception):
    """The page was dropped for not keeping up; its stream ends."""


class _BrokerState:
    """The session's news as the page shows it (the ``broker`` state and its detail)."""

    def __init__(self, server: SignServer) -> None:
        self.server = server

    def connected(self, session: MqttSession) -> None:
        self.server.set_broker("connected")

    def disconnected(self, session: MqttSession, retry_in_s: float | None) -> None:
        if retry_in_s is None:
            detail = session.detail
            if session.ending is not Ending.SUBSCRIPTION_REFUSED:
                detail = f"the broker refused the sign's login ({detail})"
            self.server.set_broker("not authorised", detail)
        elif session.ending is Ending.KEEPALIVE:
            limit = round(session.options.loss_bound_s)
            self.server.set_broker("unreachable", f"connection lost: no answer within {limit}s")
        else:
            self.server.set_broker("unreachable", session.detail)

    def denied(self, session: MqttSession, topic: str, reason: str, first: bool) -> None:
        return None  # a sign publishes nothing

    def accepted(self, session: MqttSession, topic: str) -> None:
        return None

    def downgraded(self, session: MqttSession) -> None:
        return None


async def serve(
    server: SignServer, host: str, port: int, ready: asyncio.Event | None = None
) -> int:
    """Listen on ``host:port`` and follow the broker until the login is refused.

    An address that cannot be bound raises OSError before anything else starts.
    """
    guard = Guard(server.trouble, connection_cap(server.max_connections), server.head_timeout_s)
    guard.quiet_library_logs()
    runner = web.AppRunner(
        server.app(guard),
        handle_signals=False,
        access_log=None,
        shutdown_timeout=0.5,
        keepalive_timeout=2 * server.head_timeout_s,  # the guard's deadline comes first
    )
    await runner.setup()
    listener: asyncio.Server | None = None
    try:
        listener = await listen(runner, guard, host, port)
        if ready is not None:
            ready.set()
        return await server.follow_broker()
    finally:
        if listener is not None:
            listener.close()
        for queue in list(server.clients):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(None)
        await runner.cleanup()
        guard.restore_library_logs()
