"""The sign publisher against a real Mosquitto on a loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence

import aiomqtt

from progressived.broker import Mosquitto
from progressived.mqtt.payloads import Topics
from progressived.mqtt.publisher import PendingMessage, SignPublisher
from progressived.mqtt.settings import MqttSettings


class MemoryOutbox:
    """The ledger's outbox contract in memory: rows leave only when acknowledged."""

    def __init__(self) -> None:
        self.rows: list[PendingMessage] = []
        self.acked: list[int] = []

    def add(self, topic: str, payload: dict[str, object]) -> None:
        row_id = len(self.rows) + len(self.acked) + 1
        self.rows.append(PendingMessage(row_id, topic, json.dumps(payload), 1, False))

    async def pending(self, limit: int) -> Sequence[PendingMessage]:
        return self.rows[:limit]

    async def ack(self, ids: Sequence[int]) -> None:
        self.acked.extend(ids)
        self.rows = [r for r in self.rows if r.id not in ids]


async def collect(broker: Mosquitto, topic: str, count: int, timeout: float = 10.0) -> list[dict]:
    out: list[dict] = []
    async with aiomqtt.Client(broker.host, broker.port, identifier="test-sub") as client:
        await client.subscribe(topic, qos=1)
        async with asyncio.timeout(timeout):
            async for message in client.messages:
                assert isinstance(message.payload, bytes)
                out.append({"topic": str(message.topic), **json.loads(message.payload)})
                if len(out) >= count:
                    break
    return out


def settings(broker: Mosquitto) -> MqttSettings:
    return MqttSettings(
        host=broker.host, port=broker.port, reconnect_initial_s=0.1, reconnect_max_s=0.5
    )


async def test_outbox_rows_are_published_in_order_and_acked(mosquitto: Mosquitto) -> None:
    topics = Topics("progressive", "t1")
    outbox = MemoryOutbox()
    for seq in range(1, 6):
        outbox.add(topics.event, {"seq": seq, "kind": "round_locked"})
    publisher = SignPublisher(settings(mosquitto), topics, outbox)
    listener = asyncio.create_task(collect(mosquitto, topics.event, 5))
    await asyncio.sleep(0.3)
    runner = asyncio.create_task(publisher.run())
    got = await listener
    assert [m["seq"] for m in got] == [1, 2, 3, 4, 5]
    for _ in range(50):
        if not outbox.rows:
            break
        await asyncio.sleep(0.05)
    assert outbox.acked == [1, 2, 3, 4, 5]
    await publisher.stop()
    await runner


async def test_meter_is_retained_coalesced_and_status_online(mosquitto: Mosquitto) -> None:
    topics = Topics("progressive", "t1")
    publisher = SignPublisher(
        MqttSettings(host=mosquitto.host, port=mosquitto.port, meter_max_rate_hz=2),
        topics,
        MemoryOutbox(),
    )
    runner = asyncio.create_task(publisher.run())
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
        publisher = SignPublisher(settings(broker), topics, outbox)
        runner = asyncio.create_task(publisher.run())
        publisher.set_meter("main", {"cents": 1})
        for _ in range(100):
            if publisher.connected:
                break
            await asyncio.sleep(0.05)
        broker.stop()
        await asyncio.sleep(0.3)
        for seq in (10, 11, 12):
            outbox.add(topics.event, {"seq": seq})
            publisher.wake()
        publisher.set_meter("main", {"cents": 2})
        await asyncio.sleep(0.5)
        assert len(outbox.rows) == 3  # nothing acknowledged while the broker is down
        broker.start()
        for _ in range(100):
            if not outbox.rows:
                break
            await asyncio.sleep(0.05)
        assert outbox.acked == [10 - 9, 11 - 9, 12 - 9]
        got: list[dict] = []
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
