"""An intake client (the link controller's) on a real Mosquitto: a batch published with one
wait for all its PUBACKs, the packets queued between two writes sent together, in order.

Why: the link answers hundreds of messages a batch; awaiting each PUBACK with its own task,
and writing each packet with its own system call, were a large share of its CPU
(docs/performance.md, "The link"). These check that the faster paths lose nothing: every
message arrives, in order, refusals still come back per message.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiomqtt

from progressived.mqtt.client import BrokerOptions
from progressived.mqtt.session import MqttSession
from progressived.testing.broker import Mosquitto
from progressived.testing.waits import until
from tests.doc_broker import PASSWORDS, DocBroker


def options(broker: Any, **kw: Any) -> BrokerOptions:
    base: dict[str, Any] = {"host": broker.host, "port": broker.port, "client_id": "intake-test",
                            "publish_timeout_s": 5.0}
    return BrokerOptions(**{**base, **kw})


@contextlib.asynccontextmanager
async def running(session: MqttSession) -> AsyncIterator[None]:
    task = asyncio.create_task(session.run())
    try:
        await until(lambda: session.connected, "the connection", 15.0, every=0.01)
        yield
    finally:
        await session.stop()
        await asyncio.wait_for(task, 10)


async def _unused(message: aiomqtt.Message) -> None:  # the intake takes every message
    raise AssertionError(message)


async def test_a_batch_comes_back_whole_and_in_order_with_its_packets_joined() -> None:
    got: list[bytes] = []
    with Mosquitto() as broker:
        session = MqttSession(options(broker))
        session.subscribe("intake/#", _unused)
        session.intake = lambda topic, payload: got.append(payload)
        async with running(session):
            client: Any = session._client
            sends = 0
            real_send = client._client._sock_send

            def counted(buf: bytes) -> int:
                nonlocal sends
                sends += 1
                return int(real_send(buf))

            client._client._sock_send = counted
            batch = [("intake/x", str(i).encode(), False) for i in range(400)]
            assert await session.publish_all(batch) == [True] * 400
            await until(lambda: len(got) == 400, "every message back", 15.0, every=0.01)
    assert got == [str(i).encode() for i in range(400)]
    # 400 PUBLISHes and about 400 PUBACKs for what came back, in far fewer writes
    assert 0 < sends < 400


async def test_refusals_come_back_per_message_within_a_batch() -> None:
    """MQTT 5: the broker's ACL refuses one message of the batch; only that one is False."""
    with DocBroker() as broker:
        o = options(broker, client_id="tcp-07", username="tcp-07", password=PASSWORDS["tcp-07"])
        session = MqttSession(o)
        session.intake = lambda topic, payload: None
        own, other = "progressive/table/tcp-07/meter/main", "progressive/table/tcp-08/meter/main"
        async with running(session):
            batch = [(own, b"{}", False), (other, b"{}", False), (own, b"{}", False)]
            assert await session.publish_all(batch) == [True, False, True]
            assert session.denied_total == 1
            assert session.denied == {other: "not authorised"}
