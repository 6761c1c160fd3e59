"""docs/mqtt.md's Mosquitto ACL and accounts, exactly as documented, against rogue clients.

A controller logs in as its table id and may write only under ``progressive/table/<id>/``;
a sign may only read. Another table's controller, an empty retained message and a sign
that writes all leave table tcp-07's retained meter and status as its controller set them.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiomqtt
import pytest

from progressived.mqtt.config import MqttSection
from progressived.mqtt.payloads import Topics, meter_payload
from progressived.mqtt.publisher import SignPublisher
from progressived.sign import run_sign
from progressived.sign_broker import BrokerLogin, not_authorised
from tests.doc_broker import PASSWORDS, DocBroker, doc_accounts
from tests.test_mqtt_publisher import MemoryOutbox, sign_publisher

TCP07_METER = "progressive/table/tcp-07/meter/main"
TCP07_STATUS = "progressive/table/tcp-07/status"


@pytest.fixture
def broker() -> Iterator[DocBroker]:
    with DocBroker() as b:
        yield b


def client(broker: DocBroker, user: str | None, password: str | None = None) -> aiomqtt.Client:
    return aiomqtt.Client(
        broker.host,
        broker.port,
        username=user,
        password=password if password is not None else PASSWORDS.get(user or ""),
        identifier=None,
    )


def controller(broker: DocBroker, table: str, tmp: Path) -> SignPublisher:
    """The daemon's real publisher, logged in as the doc says: user = table id."""
    secret = tmp / f"{table}.pw"
    secret.write_text(PASSWORDS[table] + "\n")
    settings = MqttSection(
        host=broker.host,
        port=broker.port,
        username=table,
        password_file=secret,
        reconnect_initial_s=0.1,
        reconnect_max_s=0.5,
    )
    return sign_publisher(settings, Topics("progressive", table), MemoryOutbox(), version="0.1.0")


def meter(table: str, cents: int, seq: int) -> dict[str, object]:
    return meter_payload(
        table_id=table,
        meter_id="main",
        units=cents * 10_000,
        seq=seq,
        state="open",
        ts="2026-11-23T10:00:00Z",
    )


@contextlib.asynccontextmanager
async def running(publisher: SignPublisher) -> AsyncIterator[SignPublisher]:
    task = asyncio.create_task(publisher.session.run())
    try:
        yield publisher
    finally:
        await publisher.stop()
        await task


async def retained(broker: DocBroker, topic: str, settle: float = 1.0) -> dict[str, bytes]:
    """What a sign subscribing now receives as retained messages."""
    seen: dict[str, bytes] = {}
    async with client(broker, "sign-lobby") as sign:
        await sign.subscribe(topic, qos=1)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(settle):
                async for message in sign.messages:
                    if message.retain and isinstance(message.payload, bytes):
                        seen[str(message.topic)] = message.payload
    return seen


def test_the_doc_names_the_accounts_the_tests_use() -> None:
    assert doc_accounts() == ["tcp-07", "tcp-08", "link-a", "sign-lobby"]


async def test_rogue_clients_cannot_touch_another_tables_meter(
    broker: DocBroker, tmp_path: Path
) -> None:
    async with running(controller(broker, "tcp-07", tmp_path)) as tcp07:
        tcp07.set_meter("main", meter("tcp-07", 100_045, 57))
        for _ in range(50):
            if TCP07_METER in await retained(broker, TCP07_METER, 0.2):
                break
        # Another table's controller: a forged huge seq, then an empty retained message
        # (which would delete the meter for new signs), on the meter and on the status.
        async with client(broker, "tcp-08") as rogue:
            await rogue.publish(TCP07_METER, json.dumps(meter("tcp-07", 1, 10**12)), 1, True)
            await rogue.publish(TCP07_METER, b"", qos=1, retain=True)
            await rogue.publish(TCP07_STATUS, b"", qos=1, retain=True)
            await rogue.publish(
                "progressive/table/tcp-08/meter/main", json.dumps(meter("tcp-08", 5, 1)), 1, True
            )
        # A sign that tries to write.
        async with client(broker, "sign-lobby") as sign:
            await sign.publish(TCP07_METER, json.dumps(meter("tcp-07", 2, 10**12)), 1, True)
            await sign.publish(TCP07_METER, b"", qos=1, retain=True)
        seen = await retained(broker, "progressive/table/#")
        assert json.loads(seen[TCP07_METER]) == meter("tcp-07", 100_045, 57)
        status = json.loads(seen[TCP07_STATUS])
        assert (status["status"], status["boot"]) == ("online", tcp07.boot)
        # The rogue's own table works: the refusals above were the ACL, not a broken login.
        assert json.loads(seen["progressive/table/tcp-08/meter/main"])["cents"] == 5


@pytest.mark.parametrize(
    ("user", "password"), [(None, None), ("tcp-07", "wrong"), ("nobody", "pw-tcp-07")]
)
async def test_anonymous_and_bad_passwords_are_refused(
    broker: DocBroker, user: str | None, password: str | None
) -> None:
    with pytest.raises(aiomqtt.MqttError) as refused:
        async with client(broker, user, password):
            pass
    assert not_authorised(refused.value), refused.value


async def test_a_new_boot_unfreezes_a_sign_after_a_stale_high_seq(
    broker: DocBroker, tmp_path: Path
) -> None:
    out, err = io.StringIO(), io.StringIO()
    login = BrokerLogin(broker.host, broker.port, "sign-lobby", PASSWORDS["sign-lobby"])
    sign = asyncio.create_task(
        run_sign(login, "progressive", "tcp-07", "main", out=out, err=err, plain=True)
    )
    try:
        # A run whose ledger stood at seq 900 000 (later restored from an older backup).
        async with running(controller(broker, "tcp-07", tmp_path)) as first:
            first.set_meter("main", meter("tcp-07", 200_000, 900_000))
            await wait_for(lambda: "$2,000.00" in out.getvalue(), "the first run's meter")
        async with running(controller(broker, "tcp-07", tmp_path)) as second:
            second.set_meter("main", meter("tcp-07", 100_010, 12))
            await wait_for(lambda: "$1,000.10" in out.getvalue(), "the new run's lower seq")
        assert out.getvalue().splitlines()[-1].startswith("main $1,000.10")
    finally:
        sign.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sign


async def wait_for(predicate, what: str, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)
    assert predicate(), what
