"""A minimal link controller for tests: the pure link book on a real broker, in memory.

It follows docs/link.md exactly (topics, messages, heartbeats, the retained linked meter)
but keeps no ledger: its "head" is a counter with a hash of it. Tests use it to play a
table daemon against a link, to stop the link (``down``: no heartbeats, messages dropped
unread, as a stopped controller), to repeat every reply (``duplicate``), and to count
what the book applied (``applied``) so nothing is applied twice.

    async with FakeLink(broker.host, broker.port, tables=("t-1",)) as link:
        ...
        assert [a.seq for a in link.applied_for("t-1")] == [1, 2, 3]
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Mapping, Sequence
from fractions import Fraction
from types import TracebackType

import aiomqtt

from progressived.core.params import Policy
from progressived.link.core import book
from progressived.link.core import messages as lm
from progressived.link.core import params as lp
from progressived.link.core.state import Applied
from progressived.mqtt.config import NO_DELAY
from progressived.runtime.clock import utc_now

STOP_S = 5.0  # the longest a stop waits for the session to end
PMG_HANDS: Mapping[str, Fraction] = {"royal-flush": Fraction(1), "straight-flush": Fraction(1, 10)}


def _head(n: int) -> lm.LedgerHead:
    return lm.LedgerHead(seq=n, hash=hashlib.sha256(f"fake-link:{n}".encode()).hexdigest())


class FakeLink:
    """One link with one linked meter, answering tables through the broker."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tables: Sequence[str],
        link_id: str = "link-a",
        meter: str = "main",
        seed: int = 1_000_000_000,
        rate: Fraction = Fraction(15, 100),
        reserve_rate: Fraction = Fraction(2, 100),
        hands: Mapping[str, Fraction] = PMG_HANDS,
        policy: Policy = Policy.SEQUENTIAL,
        prefix: str = "progressive",
        heartbeat_s: float = 0.2,
    ) -> None:
        spec = lp.MeterSpec(meter, seed=seed, rate=rate, reserve_rate=reserve_rate, hands=hands)
        self.params = lp.LinkParams(link_id, (spec,), frozenset(tables), policy=policy)
        self.state = book.open_book(self.params)
        self.host, self.port, self.prefix = host, port, prefix
        self.heartbeat_s = heartbeat_s
        self.head = _head(0)
        self.applied: list[Applied] = []
        self.results: list[lm.Result] = []
        self.down = False  # stopped: no heartbeats, messages dropped unread
        self.duplicate = False  # every reply published twice
        self._client: aiomqtt.Client | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._ready = asyncio.Event()

    def applied_for(self, table: str) -> list[Applied]:
        return [a for a in self.applied if a.table == table]

    def meter_units(self, meter: str | None = None) -> int:
        meter_id = meter or self.params.meters[0].id
        return book.meter_view(self.params, self.state, meter_id, self.head).units

    # ------------------------------------------------------------- life
    async def __aenter__(self) -> FakeLink:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run()), loop.create_task(self._beat())]
        async with asyncio.timeout(10):
            await self._ready.wait()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for task in self._tasks:
            task.cancel()
        # Bounded: a broker that does not answer the disconnect (frozen, gone) costs at
        # most STOP_S, never the test's whole timeout.
        with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError, TimeoutError):
            async with asyncio.timeout(STOP_S):
                await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            try:
                client = aiomqtt.Client(
                    self.host, self.port, identifier=self.params.link_id, socket_options=NO_DELAY
                )
                async with client:
                    self._client = client
                    topic = lm.from_table_topic(self.prefix, self.params.link_id, "+")
                    await client.subscribe(topic, qos=1)
                    await self._publish_meters()
                    self._ready.set()
                    async for message in client.messages:
                        await self._received(str(message.topic), message.payload)
            except aiomqtt.MqttError:
                self._client = None
                await asyncio.sleep(0.1)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            if self.down or self._client is None:
                continue
            for table in sorted(self.params.tables):
                beat = book.heartbeat(self.params, self.state, table, self.head, utc_now())
                topic = lm.to_table_topic(self.prefix, self.params.link_id, table)
                with contextlib.suppress(aiomqtt.MqttError):
                    await self._client.publish(topic, lm.encode(beat), qos=1)

    # ------------------------------------------------------------- messages
    async def _received(self, topic: str, payload: bytes) -> None:
        if self.down:
            return
        table = lm.table_of_topic(self.prefix, self.params.link_id, topic)
        step = book.receive(
            self.params,
            self.state,
            payload,
            topic_table=table,
            at_ms=int(time.time() * 1000),
            head=self.head,
        )
        self.state = step.state
        changed = False
        for event in step.events:
            if isinstance(event, Applied):
                self.applied.append(event)
                self.head = _head(self.head.seq + 1)
                changed = True
        for reply in step.replies:
            if isinstance(reply, lm.Result):
                self.results.append(reply)
            out = lm.to_table_topic(self.prefix, self.params.link_id, reply.table)
            for _ in range(2 if self.duplicate else 1):
                await self._publish(out, lm.encode(reply))
        if changed:
            await self._publish_meters()

    async def _publish_meters(self) -> None:
        for spec in self.params.meters:
            view = book.meter_view(self.params, self.state, spec.id, self.head)
            topic = lm.meter_topic(self.prefix, self.params.link_id, spec.id)
            await self._publish(topic, lm.encode(view), retain=True)

    async def _publish(self, topic: str, payload: bytes, retain: bool = False) -> None:
        if self._client is not None:
            with contextlib.suppress(aiomqtt.MqttError):
                await self._client.publish(topic, payload, qos=1, retain=retain)
