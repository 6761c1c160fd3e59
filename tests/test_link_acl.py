"""docs/link.md's Mosquitto ACL, exactly as documented, on a real broker with passwords.

A table logs in as its table id and can speak only for itself; only the link writes the
tables' reply topics and the retained linked meter; a sign only reads. The messages that
do get through are the protocol's, answered by the link book.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiomqtt
import pytest

from progressived.link.core import book
from progressived.link.core import messages as m
from progressived.mqtt.acl import LinkAccounts, floor_acl
from tests.doc_broker import PASSWORDS as DOC_PASSWORDS
from tests.doc_broker import DocBroker, doc_block
from tests.link_sim import LINK_HEAD, SimTable, link_params

LINK_DOC = Path(__file__).parent.parent / "docs" / "link.md"
# The accounts of the link tests that are not the doc's own floor (tables t1 and t2).
PASSWORDS = {"t1": "pw-t1", "t2": "pw-t2", "link-a": "pw-link-a", "sign-lobby": "pw-sign"}
P = "progressive"


def doc_acl() -> str:
    """The broker's whole ACL, as docs/mqtt.md gives it (docs/link.md repeats its link
    part, which must be in it line for line)."""
    acl = doc_block("`/etc/mosquitto/progressive.acl`")
    text = LINK_DOC.read_text()
    match = re.search(r"its link part, under which.*?\n```\n(.*?)```", text, flags=re.DOTALL)
    assert match, "docs/link.md has no ACL block"
    lines = {line.split("#")[0].strip() for line in acl.splitlines()}
    for line in match.group(1).splitlines():
        rule = line.split("#")[0].strip()
        assert not rule or rule in lines, f"docs/link.md's ACL line {rule!r} is not docs/mqtt.md's"
    return acl


@dataclass
class LinkBroker(DocBroker):
    """The doc's broker for a floor of other tables: link-a over ``tables``, the ACL written
    as ``progressivectl broker-acl`` writes it, per-client passwords (loopback, free port)."""

    tables: tuple[str, ...] = ("t1", "t2")
    accounts: dict[str, str] = field(default_factory=lambda: dict(PASSWORDS))

    def start(self) -> LinkBroker:
        links = [LinkAccounts("link-a", "link-a", self.tables)]
        self.acl = floor_acl(P, links, ["sign-lobby"])
        super().start()
        return self


@pytest.fixture
def broker() -> Iterator[DocBroker]:
    """The doc's floor: its configuration, ACL and accounts (link-a over uth-01, uth-02)."""
    doc_acl()  # docs/link.md agrees with it
    with DocBroker() as b:
        yield b


def client(broker: DocBroker, user: str) -> aiomqtt.Client:
    return aiomqtt.Client(
        broker.host, broker.port, username=user, password=DOC_PASSWORDS[user], identifier=user
    )


async def collect(c: aiomqtt.Client, into: list[aiomqtt.Message]) -> None:
    async for message in c.messages:
        into.append(message)


async def settle(seconds: float = 0.6) -> None:
    await asyncio.sleep(seconds)


async def test_each_party_is_confined_by_the_documented_acl(broker: DocBroker) -> None:
    params = dataclasses.replace(link_params(2), tables=frozenset({"uth-01", "uth-02"}))
    state = book.open_book(params)
    t1, t2 = SimTable("uth-01"), SimTable("uth-02")
    at_link: list[aiomqtt.Message] = []
    at_t1: list[aiomqtt.Message] = []
    at_t2: list[aiomqtt.Message] = []
    async with (
        client(broker, "link-a") as link,
        client(broker, "uth-01") as c1,
        client(broker, "uth-02") as c2,
        client(broker, "sign-lobby") as sign,
    ):
        await link.subscribe(f"{P}/link/link-a/from/+", qos=1)
        await c1.subscribe(f"{P}/link/link-a/to/#", qos=1)  # asks for more than it may read
        await c2.subscribe(f"{P}/link/link-a/to/uth-02", qos=1)
        tasks = [
            asyncio.create_task(collect(link, at_link)),
            asyncio.create_task(collect(c1, at_t1)),
            asyncio.create_task(collect(c2, at_t2)),
        ]
        try:
            honest = m.encode(t1.contribute(3))
            forged = m.encode(t2.contribute(500))  # uth-01 pretending to be uth-02
            await c1.publish(m.from_table_topic(P, "link-a", "uth-01"), honest, qos=1)
            await c1.publish(m.from_table_topic(P, "link-a", "uth-02"), forged, qos=1)
            await settle()
            assert [str(x.topic) for x in at_link] == [f"{P}/link/link-a/from/uth-01"]
            # The link answers what it received, through the book, on the sender's topic.
            for message in at_link:
                assert isinstance(message.payload, bytes)
                table = m.table_of_topic(P, "link-a", str(message.topic))
                step = book.receive(
                    params, state, message.payload, topic_table=table, at_ms=0, head=LINK_HEAD
                )
                state = step.state
                for reply in step.replies:
                    await link.publish(
                        m.to_table_topic(P, "link-a", reply.table), m.encode(reply), 1
                    )
                view = book.meter_view(params, state, "pmg", LINK_HEAD)
                await link.publish(m.meter_topic(P, "link-a", "pmg"), m.encode(view), 1, True)
            await link.publish(m.to_table_topic(P, "link-a", "uth-02"), b'{"for":"uth-02"}', qos=1)
            # Tables and signs cannot write the link's topics.
            for rogue in (c1, sign):
                await rogue.publish(m.meter_topic(P, "link-a", "pmg"), b"", qos=1, retain=True)
                await rogue.publish(m.meter_topic(P, "link-a", "pmg"), b"{}", qos=1, retain=True)
                await rogue.publish(m.to_table_topic(P, "link-a", "uth-02"), b"fake", qos=1)
            await settle()
        finally:
            for task in tasks:
                task.cancel()
        # uth-01 read only its own reply (not uth-02's), and it says applied.
        assert [str(x.topic) for x in at_t1] == [f"{P}/link/link-a/to/uth-01"]
        reply = m.decode_link(at_t1[0].payload)
        assert isinstance(reply, m.Result) and reply.status == "applied" and reply.seq == 1
        assert [x.payload for x in at_t2] == [b'{"for":"uth-02"}']
        assert -state.balances["linked_wagers:pmg"] == 3 * 1_000_000  # the forgery never arrived
    # A sign subscribing now sees the link's retained meter, untouched by the rogues.
    async with client(broker, "sign-lobby") as sign:
        await sign.subscribe(f"{P}/link/link-a/meter/#", qos=1)
        async with asyncio.timeout(5):
            async for message in sign.messages:
                meter = m.decode_link(message.payload)
                assert isinstance(meter, m.LinkedMeter) and meter.lseq == 1
                assert meter.units == state.balances["meter:pmg"]
                break
