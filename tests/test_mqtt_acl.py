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
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from progressived.config.daemon import WatchdogSection
from progressived.daemon.health import Health, assess, check_health
from progressived.link.runtime.config import link_config_from
from progressived.mqtt.client import BrokerOptions
from progressived.mqtt.config import MqttSection
from progressived.mqtt.payloads import Topics, meter_payload
from progressived.mqtt.publisher import SignPublisher
from progressived.mqtt.session import MqttSession
from progressived.signs.broker import BrokerLogin, not_authorised
from progressived.signs.terminal import run_sign
from progressived.testing.waits import until
from tests.conftest import ROOT
from tests.doc_broker import PASSWORDS, DocBroker, doc_accounts, doc_block
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
    assert doc_accounts() == ["uth-01", "uth-02", "link-a", "sign-lobby"]
    assert set(doc_accounts()) <= set(PASSWORDS)


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
            await until(lambda: "$2,000.00" in out.getvalue(), "the first run's meter")
        async with running(controller(broker, "tcp-07", tmp_path)) as second:
            second.set_meter("main", meter("tcp-07", 100_010, 12))
            await until(lambda: "$1,000.10" in out.getvalue(), "the new run's lower seq")
        assert out.getvalue().splitlines()[-1].startswith("main $1,000.10")
    finally:
        sign.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sign


# --------------------------------------------------------------------------- the broker


def test_the_documented_listeners_work_on_any_machine_and_bind_an_address() -> None:
    """Pasted as is, the configuration listens on loopback only (an address the machine
    lacks stops Mosquitto: tests/test_operations_install.py starts it verbatim in a root
    whose only address is loopback); the floor's listener is a line to uncomment. Every
    listener names its address, never every interface."""
    from tests.mqtt_schemas import MQTT_DOC

    conf = doc_block("`/etc/mosquitto/conf.d/progressive.conf`")
    assert [line for line in conf.splitlines() if line.startswith("listener")] == [
        "listener 1883 127.0.0.1"
    ]
    assert "#listener 1883 10.20.0.5" in conf.splitlines()
    listeners = re.findall(r"^#?listener .*$", MQTT_DOC.read_text(), flags=re.MULTILINE)
    assert len(listeners) == 3, listeners  # the floor address, loopback, and TLS
    assert all(len(line.split()) == 3 for line in listeners), listeners  # port AND address
    for line in ("use_username_as_clientid true", "persistence true", "allow_anonymous false"):
        assert line in conf.splitlines(), line


async def test_the_documented_broker_starts_without_a_warning(broker: DocBroker) -> None:
    async with asyncio.timeout(10):
        while "running" not in broker.log_path.read_text():
            await asyncio.sleep(0.05)
    assert broker.warnings() == []


def session(broker: DocBroker, user: str, *observers: Any) -> MqttSession:
    o = BrokerOptions(
        host=broker.host,
        port=broker.port,
        client_id=user,
        username=user,
        password=PASSWORDS[user],
        reconnect_initial_s=0.05,
        reconnect_max_s=0.2,
    )
    return MqttSession(o, observers=observers)


@contextlib.asynccontextmanager
async def connected(*sessions: MqttSession) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(s.run()) for s in sessions]
    try:
        async with asyncio.timeout(10):
            while not all(s.connected for s in sessions):
                await asyncio.sleep(0.01)
        yield
    finally:
        for s in sessions:
            await s.stop()
        await asyncio.gather(*tasks)


async def test_only_a_member_table_writes_its_request_topic_on_the_link(broker: DocBroker) -> None:
    """Signs, the link controller and another table are refused by the broker (MQTT 5
    PUBACK 0x87) on a table's request topic; the link receives the table's own only."""
    got: list[str] = []
    link, sign = session(broker, "link-a"), session(broker, "sign-lobby")
    t07, t08 = session(broker, "uth-01"), session(broker, "uth-02")

    async def heard(message: aiomqtt.Message) -> None:
        got.append(f"{message.topic}:{message.payload!r}")

    link.subscribe("progressive/link/link-a/from/+", heard)
    async with connected(link, sign, t07, t08):
        refused = [
            (sign, "progressive/link/link-a/from/sign-lobby"),
            (sign, "progressive/link/link-a/from/uth-01"),
            (link, "progressive/link/link-a/from/link-a"),
            (link, "progressive/link/link-a/from/uth-01"),
            (t08, "progressive/link/link-a/from/uth-01"),  # another table's topic
            (t07, "progressive/link/link-b/from/uth-01"),  # a link it is not on
        ]
        for who, topic in refused:
            assert await who.publish(topic, b"forged") is False, (who.options.username, topic)
            assert who.denied[topic] == "not authorised"
        assert await t07.publish("progressive/link/link-a/from/uth-01", b"own") is True
        async with asyncio.timeout(5):
            while not got:
                await asyncio.sleep(0.01)
    # The broker handles one client's packets at a time, in order: had a refused message
    # been delivered, it would have arrived before the table's own.
    assert got == ["progressive/link/link-a/from/uth-01:b'own'"]


async def test_a_table_cannot_take_the_link_controllers_session(
    broker: DocBroker, tmp_path: Path
) -> None:
    """A member table connecting with the link's client ids (``link-a``, and the old
    ``progressived-link-link-a``) gets a session of its own: the link is never disconnected
    and keeps answering."""
    from tests.link_harness import TableClient, link_data, running
    from tests.link_sim import SimTable

    secret = tmp_path / "link.pw"
    secret.write_text(PASSWORDS["link-a"] + "\n")
    data = link_data(broker.port, tmp_path, tables=["uth-01", "uth-02"])
    data["mqtt"].update(username="link-a", password_file=str(secret))
    config = link_config_from(data, tmp_path / "link.toml")
    table = SimTable("uth-01")
    async with (
        running(config) as (controller, _),
        TableClient(broker, "uth-01", PASSWORDS["uth-01"]) as t07,
    ):
        await t07.send(table.contribute(1))
        await t07.wait("result", lambda r: r.seq == 1 and r.status == "applied")
        for identifier in ("link-a", "progressived-link-link-a"):
            async with aiomqtt.Client(
                broker.host,
                broker.port,
                username="uth-02",
                password=PASSWORDS["uth-02"],
                identifier=identifier,
            ) as rogue:
                await rogue.publish("progressive/table/uth-02/status", b"{}", qos=1)
        await t07.send(table.contribute(1))
        await t07.wait("result", lambda r: r.seq == 2 and r.status == "applied")
        assert controller.mqtt.connected and controller.mqtt.attempts == 1


async def test_a_second_connection_with_one_account_takes_over(broker: DocBroker) -> None:
    """The documented consequence of binding the client id to the user name: one account,
    one connection (the older is closed)."""
    first = session(broker, "sign-lobby")
    async with connected(first), aiomqtt.Client(
        broker.host, broker.port, username="sign-lobby", password=PASSWORDS["sign-lobby"]
    ):
        async with asyncio.timeout(10):
            while first.connections < 2:  # lost, then back (and the other one closed)
                await asyncio.sleep(0.01)


async def test_a_controller_the_acl_does_not_match_keeps_its_outbox_and_is_unhealthy(
    broker: DocBroker, tmp_path: Path
) -> None:
    """Table tcp-09 logging in as tcp-08 (the user name is not the table id): every publish
    is refused; nothing leaves the outbox, the refusal is counted and the table unhealthy."""
    secret = tmp_path / "tcp-08.pw"
    secret.write_text(PASSWORDS["tcp-08"] + "\n")
    settings = MqttSection(
        host=broker.host,
        port=broker.port,
        username="tcp-08",
        password_file=secret,
        reconnect_initial_s=0.1,
        reconnect_max_s=0.5,
    )
    topics = Topics("progressive", "tcp-09")
    outbox = MemoryOutbox()
    outbox.add(topics.event, {"seq": 1, "kind": "round_locked"})
    outbox.add(topics.event, {"seq": 2, "kind": "round_locked"})
    publisher = sign_publisher(settings, topics, outbox)
    health = Health(board_online=True, broker=publisher.session)
    async with running(publisher):
        async with asyncio.timeout(10):
            while publisher.session.denied_total < 3:  # the status, the events, again
                await asyncio.sleep(0.02)
        ok, why = assess(health, WatchdogSection())
        assert publisher.session.connected
        assert not ok and why.startswith(
            "degraded: broker refused publishing on progressive/table/tcp-09/"
        )
        assert check_health(health, WatchdogSection()) == (True, "ok")  # no restart for it
        assert [r.id for r in outbox.rows] == [1, 2] and outbox.acked == []


def test_broker_acl_writes_the_documented_acl_and_accounts(tmp_path: Path) -> None:
    """``progressivectl broker-acl`` from the shipped pair's files, as shipped
    (config/link.toml, config/linked-table.toml), prints docs/mqtt.md's ACL (which the tests
    above load into Mosquitto) and its account steps: the doc and the files name the same
    tables."""
    link = ROOT / "config" / "link.toml"
    tables = ["--table-config", str(ROOT / "config" / "linked-table.toml")]
    args = ["broker-acl", "--link-config", str(link), *tables, "--sign", "sign-lobby"]
    acl = ctl(*args)
    assert (acl.returncode, acl.stderr) == (0, "")
    assert acl.stdout == doc_block("`/etc/mosquitto/progressive.acl`")
    steps = ctl(*args, "--passwd")
    assert steps.stdout == doc_block("`/etc/mosquitto/passwd`")
    # A table whose user name is not its id does not fit the ACL: one line, exit 2.
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(
        (ROOT / "config" / "progressived.toml")
        .read_text()
        .replace('# username = "tcp-07"', 'username = "table-tcp-07"')
    )
    refused = ctl("broker-acl", "--link-config", str(link), "--table-config", str(wrong))
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == (
        f"progressivectl broker-acl: {wrong}: mqtt.username: 'table-tcp-07'; it must be the "
        "table id 'tcp-07' (the ACL's user name)\n"
    )
    # One name, two accounts.
    clash = ctl("broker-acl", "--link-config", str(link), "--sign", "uth-01")
    assert clash.returncode == 2 and "'uth-01' is both a table of link-a and a sign" in clash.stderr


def ctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "progressived.cli.ctl", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
