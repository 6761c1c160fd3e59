"""The sign publisher against a real Mosquitto on a loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import aiomqtt
import pytest

from progressived.mqtt.config import MqttSection
from progressived.mqtt.payloads import Topics
from progressived.mqtt.publisher import PendingMessage, SignPublisher
from progressived.mqtt.session import MqttSession
from progressived.testing.broker import Mosquitto
from progressived.testing.waits import until


class MemoryOutbox:
    """The ledger's outbox contract in memory: rows leave only when acknowledged."""

    def __init__(self) -> None:
        self.rows: list[PendingMessage] = []
        self.acked: list[int] = []
        self.calls: list[str] = []  # each call reaching the outbox (a ledger-thread turn)

    def add(self, topic: str, payload: dict[str, object]) -> None:
        row_id = len(self.rows) + len(self.acked) + 1
        self.rows.append(PendingMessage(row_id, topic, json.dumps(payload), 1, False))

    async def pending(self, limit: int) -> Sequence[PendingMessage]:
        self.calls.append("pending")
        return self.rows[:limit]

    async def ack(self, ids: Sequence[int]) -> None:
        self.calls.append(f"ack {list(ids)}")
        self._ack(ids)

    def _ack(self, ids: Sequence[int]) -> None:
        self.acked.extend(ids)
        self.rows = [r for r in self.rows if r.id not in ids]

    async def ack_then_pending(self, ids: Sequence[int], limit: int) -> Sequence[PendingMessage]:
        self.calls.append(f"ack {list(ids)} then pending")
        self._ack(ids)
        return self.rows[:limit]


async def collect(
    broker: Mosquitto,
    topic: str,
    count: int,
    timeout: float = 10.0,
    subscribed: asyncio.Event | None = None,
) -> list[dict[str, Any]]:
    """The first ``count`` messages on ``topic``; ``subscribed`` is set at the SUBACK."""
    out: list[dict[str, Any]] = []
    async with aiomqtt.Client(broker.host, broker.port, identifier="test-sub") as client:
        await client.subscribe(topic, qos=1)
        if subscribed is not None:
            subscribed.set()
        async with asyncio.timeout(timeout):
            async for message in client.messages:
                assert isinstance(message.payload, bytes)
                out.append({"topic": str(message.topic), **json.loads(message.payload)})
                if len(out) >= count:
                    break
    return out


def sign_publisher(
    settings: MqttSection, topics: Topics, outbox: MemoryOutbox, **kwargs: Any
) -> SignPublisher:
    """The daemon's publisher on a session of its own (the daemon shares one with its link
    client)."""
    session = MqttSession(settings.broker_options(f"progressived-{topics.table_id}"))
    return SignPublisher(
        session, topics, outbox, meter_max_rate_hz=settings.meter_max_rate_hz, **kwargs
    )


def settings(broker: Mosquitto) -> MqttSection:
    return MqttSection(
        host=broker.host, port=broker.port, reconnect_initial_s=0.1, reconnect_max_s=0.5
    )


async def test_outbox_rows_are_published_in_order_and_acked(mosquitto: Mosquitto) -> None:
    topics = Topics("progressive", "t1")
    outbox = MemoryOutbox()
    for seq in range(1, 6):
        outbox.add(topics.event, {"seq": seq, "kind": "round_locked"})
    publisher = sign_publisher(settings(mosquitto), topics, outbox)
    subscribed = asyncio.Event()
    listener = asyncio.create_task(collect(mosquitto, topics.event, 5, subscribed=subscribed))
    await asyncio.wait_for(subscribed.wait(), 10)
    runner = asyncio.create_task(publisher.session.run())
    got = await listener
    assert [m["seq"] for m in got] == [1, 2, 3, 4, 5]
    await until(lambda: not outbox.rows, "every row acknowledged", 5)
    assert outbox.acked == [1, 2, 3, 4, 5]
    await publisher.stop()
    await runner


async def test_a_batch_is_acknowledged_with_the_next_read_in_one_outbox_call(
    mosquitto: Mosquitto,
) -> None:
    """One ledger-thread turn per batch after the first read, not an acknowledgement and a
    read apiece: the next key press's commit queues behind one call fewer."""
    topics = Topics("progressive", "t1")
    outbox = MemoryOutbox()
    outbox.add(topics.event, {"seq": 1, "kind": "round_locked"})
    publisher = sign_publisher(settings(mosquitto), topics, outbox)
    runner = asyncio.create_task(publisher.session.run())
    await until(lambda: "ack [1] then pending" in outbox.calls, "the batch acknowledged", 5)
    assert outbox.calls == ["ack [] then pending", "ack [1] then pending"]
    assert outbox.acked == [1]
    await publisher.stop()
    await runner


async def test_meter_is_retained_coalesced_and_status_online(mosquitto: Mosquitto) -> None:
    topics = Topics("progressive", "t1")
    publisher = sign_publisher(
        MqttSection(host=mosquitto.host, port=mosquitto.port, meter_max_rate_hz=2),
        topics,
        MemoryOutbox(),
    )
    runner = asyncio.create_task(publisher.session.run())
    for cents in range(100_000, 100_050):
        publisher.set_meter("main", {"cents": cents, "seq": cents})
        await asyncio.sleep(0.005)
    await asyncio.sleep(1.0)
    # A late subscriber sees the retained latest value and the online status.
    meters = await collect(mosquitto, topics.meter("main"), 1)
    assert meters[0]["cents"] == 100_049
    status = await collect(mosquitto, topics.status, 1)
    assert status[0]["status"] == "online"
    await publisher.stop()
    await runner
    status = await collect(mosquitto, topics.status, 1)
    assert status[0]["status"] == "offline"


async def test_broker_outage_loses_nothing_and_republishes_the_meter() -> None:
    topics = Topics("progressive", "t1")
    outbox = MemoryOutbox()
    with Mosquitto(persistence=True) as broker:
        # A sign with a persistent session: the broker queues QoS 1 messages for it.
        async with aiomqtt.Client(
            broker.host, broker.port, identifier="sign-1", clean_session=False
        ) as sign:
            await sign.subscribe("progressive/#", qos=1)
        publisher = sign_publisher(settings(broker), topics, outbox)
        runner = asyncio.create_task(publisher.session.run())
        publisher.set_meter("main", {"cents": 1})
        await until(lambda: publisher.connected, "the publisher connected", 5)
        broker.stop()
        await asyncio.sleep(0.3)
        for seq in (10, 11, 12):
            outbox.add(topics.event, {"seq": seq})
            publisher.wake()
        publisher.set_meter("main", {"cents": 2})
        await asyncio.sleep(0.5)
        assert len(outbox.rows) == 3  # nothing acknowledged while the broker is down
        broker.start()
        await until(lambda: not outbox.rows, "the rows acknowledged after the restart", 5)
        assert outbox.acked == [10 - 9, 11 - 9, 12 - 9]
        got: list[dict[str, Any]] = []
        async with aiomqtt.Client(
            broker.host, broker.port, identifier="sign-1", clean_session=False
        ) as sign:
            await sign.subscribe("progressive/#", qos=1)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    async for message in sign.messages:
                        assert isinstance(message.payload, bytes)
                        got.append({"topic": str(message.topic), **json.loads(message.payload)})
                        if (
                            any(m.get("cents") == 2 for m in got)
                            and sum(1 for m in got if m["topic"] == topics.event) >= 3
                        ):
                            break
        assert [m["seq"] for m in got if m["topic"] == topics.event] == [10, 11, 12], got
        assert publisher.attempts >= 2
        await publisher.stop()
        await runner


class MeterSign:
    """A subscriber to one meter topic recording every payload."""

    def __init__(self, broker: Mosquitto, topic: str) -> None:
        self.broker, self.topic = broker, topic
        self.got: list[dict[str, Any]] = []
        self.task: asyncio.Task[None] | None = None
        self.subscribed = asyncio.Event()

    async def _run(self) -> None:
        async with aiomqtt.Client(self.broker.host, self.broker.port, identifier="meter-sign") as c:
            await c.subscribe(self.topic, qos=1)
            self.subscribed.set()
            async for message in c.messages:
                assert isinstance(message.payload, bytes)
                self.got.append(json.loads(message.payload))

    async def __aenter__(self) -> MeterSign:
        self.task = asyncio.create_task(self._run())
        await asyncio.wait_for(self.subscribed.wait(), 10)  # the SUBACK
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


class StillClock:
    """The rate windows' clock, moved only by the test: the rate is judged by what is sent
    at each reading of it, never by how long a loaded machine took."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Sent:
    """The publisher's hook: each meter message sent, with the still clock's reading."""

    def __init__(self, clock: StillClock) -> None:
        self.clock = clock
        self.meters: list[tuple[float, int]] = []  # (clock reading, seq)

    def published(self, topic: str, seq: int, first_seen: float | None) -> None:
        if "/meter/" in topic:
            self.meters.append((self.clock(), seq))


def meter(cents: int, seq: int, state: str = "open") -> dict[str, object]:
    return {"meter": "main", "cents": cents, "state": state, "seq": seq, "ts": f"t{seq}"}


def rate_limited(mosquitto: Mosquitto, topics: Topics) -> tuple[SignPublisher, StillClock, Sent]:
    """A publisher allowed 2 meter messages in any second of the still clock."""
    clock = StillClock()
    sent = Sent(clock)
    publisher = sign_publisher(
        MqttSection(host=mosquitto.host, port=mosquitto.port, meter_max_rate_hz=2),
        topics,
        MemoryOutbox(),
        monotonic=clock,
        hooks=sent,
    )
    return publisher, clock, sent


async def test_a_repeat_is_not_published_and_does_not_spend_the_rate(mosquitto: Mosquitto) -> None:
    """Repeats (a bet sensor, a refusal: nothing a sign shows) are not sent and leave the
    budget whole: with the clock held still, the real change after ten of them still goes
    out, as the window's second message; the state change right after it waits for the
    window (sent only once the clock has moved a second)."""
    topics = Topics("progressive", "t1")
    publisher, clock, sent = rate_limited(mosquitto, topics)
    async with MeterSign(mosquitto, topics.meter("main")) as sign:
        runner = asyncio.create_task(publisher.session.run())
        publisher.set_meter("main", meter(100, seq=1))
        await until(lambda: sent.meters == [(1000.0, 1)], "the first value sent")
        for seq in range(2, 12):
            assert not publisher.set_meter("main", meter(100, seq=seq))
        assert publisher.set_meter("main", meter(160, seq=12))  # LOCK: a real change
        await until(lambda: len(sent.meters) == 2, "the change sent, the clock unmoved")
        publisher.set_meter("main", meter(160, seq=13, state="pending"))  # the state too
        await asyncio.sleep(0.3)  # the pump's turns while the clock stands: nothing may go
        assert len(sent.meters) == 2, sent.meters
        clock.now += 1.0  # the window has passed
        publisher.wake()
        await until(lambda: len(sent.meters) == 3, "the state change sent")
        await until(lambda: len(sign.got) == 3, "the sign has all three")
        await publisher.stop()
        await runner
    assert sent.meters == [(1000.0, 1), (1000.0, 12), (1001.0, 13)]
    assert [(m["cents"], m["state"]) for m in sign.got] == [
        (100, "open"),
        (160, "open"),
        (160, "pending"),
    ]


async def test_a_burst_is_limited_to_the_rate_and_ends_on_the_latest(mosquitto: Mosquitto) -> None:
    """Fifty changes while the clock stands still: two sent (2 Hz), the rest coalesced; each
    second of the clock then sends at most two more, and the last one sent is the latest."""
    topics = Topics("progressive", "t1")
    publisher, clock, sent = rate_limited(mosquitto, topics)
    async with MeterSign(mosquitto, topics.meter("main")) as sign:
        runner = asyncio.create_task(publisher.session.run())
        await until(lambda: publisher.connected, "connected")
        for i in range(50):
            publisher.set_meter("main", meter(1000 + i, seq=i + 1))
            await asyncio.sleep(0)  # the pump runs between changes, as between commits
        await until(lambda: len(sent.meters) >= 1, "the burst's first value sent")
        for _ in range(50):  # at most one second of the clock per value: bounded
            if sent.meters[-1][1] == 50:
                break
            count = len(sent.meters)
            clock.now += 1.0
            publisher.wake()
            await until(lambda n=count: len(sent.meters) > n, "a value sent in the next second")
        await until(lambda: sign.got and sign.got[-1]["cents"] == 1049, "the latest on the sign")
        await publisher.stop()
        await runner
    per_second = Counter(at for at, _ in sent.meters)
    assert max(per_second.values()) <= 2, per_second  # 2 Hz: two in any second
    assert len(sent.meters) < 50  # coalesced, not one message per change
    assert sent.meters[-1][1] == 50  # the latest is always delivered
    seqs = [seq for _, seq in sent.meters]
    assert seqs == sorted(seqs)


async def test_status_carries_the_head_and_is_refreshed_when_it_moves(
    mosquitto: Mosquitto, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head in the online status, the last will and the clean stop's offline status;
    while connected the online status goes out again (every STATUS_REFRESH_S) only when
    the head has moved."""
    import progressived.mqtt.publisher as publisher_module

    monkeypatch.setattr(publisher_module, "STATUS_REFRESH_S", 0.2)
    topics = Topics("progressive", "t-head")
    head = [(7, "a" * 64)]

    async def source() -> tuple[int, str]:
        return head[-1]

    seen: list[dict[str, Any]] = []
    subscribed = asyncio.Event()

    async def listen() -> None:
        async with aiomqtt.Client(mosquitto.host, mosquitto.port, identifier="head-sub") as c:
            await c.subscribe(topics.status, qos=1)
            subscribed.set()
            async for message in c.messages:
                assert isinstance(message.payload, bytes)
                seen.append(json.loads(message.payload))

    listener = asyncio.create_task(listen())
    await asyncio.wait_for(subscribed.wait(), 10)
    publisher = sign_publisher(settings(mosquitto), topics, MemoryOutbox(), head=source)
    runner = asyncio.create_task(publisher.session.run())

    await until(lambda: len(seen) >= 1)
    assert (seen[0]["status"], seen[0]["head_seq"], seen[0]["head_hash"]) == ("online", 7, "a" * 64)
    await asyncio.sleep(1.0)  # several refresh periods, the head unchanged: nothing new
    assert len(seen) == 1
    head.append((9, "b" * 64))
    await until(lambda: len(seen) >= 2)
    assert (seen[1]["status"], seen[1]["head_seq"], seen[1]["boot"]) == (
        "online",
        9,
        seen[0]["boot"],
    )
    head.append((10, "c" * 64))
    await publisher.stop()
    await runner
    await until(lambda: seen[-1]["status"] == "offline")
    assert (seen[-1]["head_seq"], seen[-1]["head_hash"]) == (10, "c" * 64)
    listener.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await listener
