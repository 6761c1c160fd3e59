"""An independent sign for tests and benchmarks: an MQTT subscriber with a persistent
session that records every message it receives (and when), across broker restarts."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiomqtt

from progressived.core.wirejson import MAX_MESSAGE, WireError, loads_object
from progressived.testing.waits import until

Payload = dict[str, Any]
Check = Callable[[str, Payload], list[str]]  # topic, payload -> what is wrong with it
Match = Callable[[str, Payload], bool]
STOP_S = 5.0  # the longest a stop waits for the session to end


@dataclass
class Subscriber:
    """Subscribes to ``topics`` at QoS 1 as ``identifier`` (a persistent session, so that a
    restarted broker delivers what it queued), reconnecting until stopped.

    ``messages`` holds (topic, payload, retained) and ``arrivals`` the ``perf_counter`` at
    which each arrived; ``check`` (e.g. a schema check) adds its findings to ``problems``,
    and so does a message no sign could read (``unreadable``: too large, too deep, not a
    JSON object).
    """

    host: str
    port: int
    identifier: str = "rig-sign"
    topics: str = "progressive/#"
    check: Check | None = None
    messages: list[tuple[str, Payload, bool]] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (topic, refusal code)
    task: asyncio.Task[None] | None = None
    waiters: list[tuple[Match, asyncio.Future[float]]] = field(default_factory=list)
    subscribed: asyncio.Event = field(default_factory=asyncio.Event)

    def _received(self, topic: str, data: Payload, retained: bool) -> None:
        now = time.perf_counter()
        self.messages.append((topic, data, retained))
        self.arrivals.append(now)
        if self.check is not None:
            self.problems.extend(self.check(topic, data))
        for pair in list(self.waiters):
            match, fut = pair
            if not fut.done() and match(topic, data):
                fut.set_result(now)
                self.waiters.remove(pair)

    def _take(self, topic: str, payload: bytes | bytearray, retained: bool) -> None:
        """Decode as a sign must (bounded: docs/mqtt.md): what no sign can read is recorded
        in ``unreadable`` and, as every publisher must respect the bound, in ``problems``."""
        try:
            data = loads_object(payload, max_bytes=MAX_MESSAGE)
        except WireError as exc:
            self.unreadable.append((topic, exc.code))
            self.problems.append(f"{topic}: unreadable ({exc})")
            return
        self._received(topic, data, retained)

    async def _run(self) -> None:
        while True:
            try:
                async with aiomqtt.Client(
                    self.host, self.port, identifier=self.identifier, clean_session=False
                ) as client:
                    await client.subscribe(self.topics, qos=1)
                    self.subscribed.set()  # the SUBACK: from now on nothing is missed
                    async for message in client.messages:
                        payload = message.payload
                        if isinstance(payload, (bytes, bytearray)):
                            self._take(str(message.topic), payload, bool(message.retain))
            except aiomqtt.MqttError:
                await asyncio.sleep(0.1)

    async def start(self, timeout: float = 15.0) -> None:
        """Start, and return once the broker has acknowledged the subscription."""
        self.task = asyncio.get_running_loop().create_task(self._run())
        try:
            async with asyncio.timeout(timeout):
                await self.subscribed.wait()
        except TimeoutError:
            await self.stop()
            raise TimeoutError(
                f"the sign's subscription was not acknowledged within {timeout} s"
            ) from None

    async def stop(self, timeout: float = STOP_S) -> None:
        """Cancel the session, bounded: a broker that does not answer the disconnect (frozen,
        gone) costs ``timeout`` seconds at most."""
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.task

    def timed(self) -> list[tuple[float, str, Payload]]:
        """(arrival, topic, payload) for every message, in order."""
        return [(at, t, m) for at, (t, m, _) in zip(self.arrivals, self.messages, strict=True)]

    def events(self, kind: str | None = None) -> list[Payload]:
        return [
            m
            for t, m, _ in self.messages
            if t.endswith("/event") and (kind is None or m.get("kind") == kind)
        ]

    def on(self, topic: str) -> list[Payload]:
        """Every payload received on exactly ``topic``."""
        return [m for t, m, _ in self.messages if t == topic]

    def meters(self, meter: str = "main") -> list[Payload]:
        """Every payload of meter ``meter`` (any table's)."""
        return [
            m
            for t, m, _ in self.messages
            if t.startswith("progressive/table/") and t.endswith(f"/meter/{meter}")
        ]

    def expect(self, match: Match) -> asyncio.Future[float]:
        """A future set to the arrival time of the next message ``match`` accepts."""
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiters.append((match, fut))
        return fut

    async def wait(self, predicate: Callable[[], object], what: str, timeout: float = 15.0) -> None:
        await until(predicate, what, timeout)

    async def wait_event(self, kind: str, count: int = 1, timeout: float = 15.0) -> Payload:
        await self.wait(lambda: len(self.events(kind)) >= count, f"{count} x {kind}", timeout)
        return self.events(kind)[count - 1]
