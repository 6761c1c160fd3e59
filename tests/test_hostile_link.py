"""Hostile bytes on the link's topics stop neither the link controller nor a table.

The link controller runs as on the floor (``progressived link`` under docs/link.md's ACL on
a real Mosquitto with passwords, its real ledger): a member table sends a 3,000-byte array
nested 1,500 deep once a second on its own topic (the one account the ACL lets write there),
and a read-only sign's account tries the same on ``.../from/<its own name>``, which the
broker refuses. The link stays up, counts each refusal it receives per table and code
(never a ledger row: docs/link.md, "Fair share"), answers the member (``seq`` 0, ``id``
``none``), and the member's contribution still applies.

A table daemon (with the fake link) gets deep, oversized and broken messages on its
``to/<table>`` and linked-meter topics: it stays up, counts them by code
(``progressive_link_unreadable_total``), logs one line per code, its ``status`` answers,
and a later real result is journaled.
"""

from __future__ import annotations

import asyncio
import re
import urllib.request
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from prometheus_client.parser import text_string_to_metric_families

from progressived.link.core.messages import Result, from_table_topic, meter_topic, to_table_topic
from progressived.runtime.control import request
from progressived.testing.broker import Mosquitto, free_port
from progressived.testing.waits import until
from tests.conftest import ROOT
from tests.link_harness import TableClient
from tests.test_link_acl import PASSWORDS, LinkBroker
from tests.test_link_process import (
    DOLLAR,
    Link,
    balance,
    contribution,
    floor,  # noqa: F401 (the fixture)
    ledger_rows,
    result_for,
    verify,
)
from tests.test_link_table_daemon import (
    TABLE,
    journal,
    linked,
    outbox_empty,
    status,
    types,
)

DEEP = b"[" * 1500 + b"]" * 1500  # the 3,000 bytes
assert len(DEEP) == 3000


def link_status(tmp: Path) -> dict[str, Any]:
    answer = request(tmp / "link.sock", {"action": "status"}, timeout=10)
    assert answer["ok"], answer
    found: dict[str, Any] = answer["status"]
    return found


@pytest.mark.e2e  # a real link controller under a four-second attack
async def test_a_deep_array_once_a_second_neither_stops_the_link_nor_closes_a_table(
    floor: tuple[Link, LinkBroker],  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    link, broker = floor
    db = tmp_path / "link.db"
    sign_topic = from_table_topic("progressive", "link-a", "sign-lobby")
    async with (
        TableClient(broker, "t1", PASSWORDS["t1"]) as t1,
        aiomqtt.Client(
            broker.host, broker.port, username="sign-lobby", password=PASSWORDS["sign-lobby"]
        ) as sign,
    ):
        await until(lambda: bool(t1.of_type("heartbeat")), timeout=15)
        for _second in range(4):  # the attack: once a second
            await sign.publish(sign_topic, DEEP, qos=1)  # refused by the broker (the ACL)
            await t1.send(DEEP)  # a member's own topic: answered with the refusal
            await asyncio.sleep(1.0)
            assert link.proc is not None and link.proc.poll() is None, "the link stopped"

        refused = await t1.wait("result", lambda r: r.seq == 0)
        assert (refused.status, refused.code, refused.id, refused.lseq) == (
            "refused",
            "too-deep",
            "none",
            0,
        )
        await until(
            lambda: link_status(tmp_path)["unreadable"].get("too-deep", 0) >= 4,
            timeout=15,
            in_thread=True,
        )
        status = await asyncio.to_thread(link_status, tmp_path)
        assert status["unreadable"] == {"too-deep": 4}
        assert status["refusals"] == {"t1": {"too-deep": 4}}  # nothing of the sign's arrived
        assert ledger_rows(db, "link_refused") == []

        # The member table plays on: its contribution is applied, heartbeats still come.
        beats = len(t1.of_type("heartbeat"))
        await t1.send(contribution(1))
        applied = await result_for(t1, 1)
        assert applied.status == "applied" and applied.lseq > 0
        await until(lambda: len(t1.of_type("heartbeat")) > beats, timeout=5)
        # Nothing was ever published toward the sign's name.
        assert all(isinstance(m, Result) and m.table == "t1" for m in t1.of_type("result"))
    assert balance(db, "meter:pmg") == 1000 * DOLLAR + 3 * DOLLAR * 15 // 100
    assert "Traceback" not in (tmp_path / "link-1.log").read_text()
    assert link.stop() == 0
    verify(db)


def unreadable_metrics(port: int) -> dict[str, float]:
    """``progressive_link_unreadable_total`` per code (labels table, link, code)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "progressive_link_unreadable_total":
                assert {k: sample.labels[k] for k in ("table", "link")} == {
                    "table": TABLE,
                    "link": "link-a",
                }
                out[sample.labels["code"]] = sample.value
    return out


@pytest.mark.e2e
async def test_junk_on_the_links_topics_leaves_a_table_playing(tmp_path: Path) -> None:
    port = free_port()
    async with linked(tmp_path, metrics_port=port) as (t, link):
        await until(lambda: status(t)["link"]["up"], "link up", in_thread=True)
        to_me = to_table_topic("progressive", "link-a", TABLE)
        meter = meter_topic("progressive", "link-a", "main")
        junk = [
            DEEP,  # too-deep
            b"[" * 100_000 + b"]" * 100_000,  # too-large (200 KB)
            b'{"type": "heartbeat", "pad": "' + b"x" * 20_000 + b'"}',  # too-large
            b"\xff\xfe\xfd",  # bad-json (not UTF-8)
            b'{"type": "meter", "units": 1e400}',  # bad-json (not a finite number)
        ]
        async with aiomqtt.Client(t.broker.host, t.broker.port) as rogue:
            for topic in (to_me, meter):
                for payload in junk:
                    await rogue.publish(topic, payload, qos=1)
        want = {"too-deep": 2, "too-large": 4, "bad-json": 4}
        await until(lambda: unreadable_metrics(port) == want, "all ten counted", in_thread=True)
        assert t.proc is not None and t.proc.poll() is None, t.log_text()[-2000:]
        lines = [line for line in t.log_text().splitlines() if "unreadable message" in line]
        assert len(lines) == 3, lines  # one line per code (a minute)
        assert status(t)["link"]["up"]
        # The rig's subscriber (a sign) could not read them either, and said so.
        assert {topic for topic, _ in t.sub.unreadable} == {to_me, meter}
        t.sub.problems[:] = [p for p in t.sub.problems if not p.startswith((to_me, meter))]

        # A real round after it: the contribution goes out and its result is journaled.
        await t.bets(1, 3)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        await until(lambda: types(link) == ["contribution"], "the contribution applied")
        await until(lambda: len(journal(t, "link_result")) == 1, "its result journaled")
        await until(lambda: outbox_empty(t), "the outbox drained")
        shown = status(t)["link"]["meters"]["main"]
        assert shown["cents"] == link.meter_units() // 10_000


def link_conf() -> str:
    """docs/link.md's broker settings for the link (``/etc/mosquitto/conf.d/link.conf``)."""
    text = (ROOT / "docs" / "link.md").read_text()
    found = re.search(r"```\n# /etc/mosquitto/conf.d/link.conf\n(.*?)```", text, re.DOTALL)
    assert found, "docs/link.md has no link.conf block"
    return found.group(1)


async def publish_and_read_on(broker: Mosquitto, topic: str, payload: bytes) -> None:
    """Publish, then read until the broker drops the connection (MqttError)."""
    async with aiomqtt.Client(broker.host, broker.port) as rogue:
        await rogue.publish(topic, payload, qos=0)
        async for _ in rogue.messages:
            pass


async def test_the_documented_broker_setting_disconnects_an_oversized_publisher() -> None:
    assert "max_packet_size" in link_conf()
    topic = from_table_topic("progressive", "link-a", "sign-lobby")
    with Mosquitto(extra_config=link_conf()) as broker:
        async with aiomqtt.Client(broker.host, broker.port) as link:
            await link.subscribe("progressive/link/link-a/from/+", qos=1)
            with pytest.raises(aiomqtt.MqttError, match="Disconnected"):
                await publish_and_read_on(broker, topic, b"[" * 100_000)
            async with aiomqtt.Client(broker.host, broker.port) as table:
                await table.publish(topic, b"1" * 65_536, qos=1)  # a table topic's bound
            async with asyncio.timeout(10):
                message = await anext(aiter(link.messages))
            assert message.payload == b"1" * 65_536  # the first and only one delivered
        log = (broker.workdir / "mosquitto.log").read_text()
    assert "disconnected due to oversize packet" in log
