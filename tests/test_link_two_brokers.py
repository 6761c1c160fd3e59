"""No single broker (docs/link.md, "The standby controller and two brokers"; docs/mqtt.md,
"Two brokers"): two real Mosquittos, each with docs/link.md's ACL and passwords; the link
controller (a process, ``[mqtt] hosts``) serves the tables on both; a table's session (the
table daemon's own :class:`~progressived.mqtt.session.MqttSession`, built from its
``[mqtt] hosts``) whose broker is SIGKILLed moves to the other, and its messages, sent
again from its outbox, are still answered -- each applied once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import aiomqtt
import pytest

from progressived.link.core.messages import Result, decode_link, encode
from progressived.link.runtime.config import load_link_config
from progressived.mqtt.config import MqttSection
from progressived.mqtt.session import MqttSession
from progressived.runtime.control import request
from progressived.testing.board import simulator_factory
from progressived.testing.broker import Mosquitto
from progressived.testing.config import render_toml
from progressived.testing.rig import table as rig_table
from tests.daemon_harness import TABLE
from tests.link_harness import until
from tests.test_link_acl import PASSWORDS, LinkBroker
from tests.test_link_process import PROGRESSIVECTL, PROGRESSIVED, contribution, ledger_rows
from tests.test_link_table_daemon import journal, linked_config, outbox_empty, status
from tests.test_link_table_daemon import until as table_until

TO_T1 = "progressive/link/link-a/to/t1"
FROM_T1 = "progressive/link/link-a/from/t1"


def write_config(tmp: Path, brokers: list[LinkBroker]) -> Path:
    (tmp / "link.pw").write_text(PASSWORDS["link-a"] + "\n")
    text = render_toml(
        {
            "link": {"id": "link-a", "tables": "@TABLES@", "heartbeat_s": 0.3},
            "link.meters": [
                {"id": "pmg", "paytable": "pmg-01", "rate": 0.15, "reserve_rate": 0.02}
            ],
            "mqtt": {
                "hosts": "@HOSTS@",
                "username": "link-a",
                "password_file": tmp / "link.pw",
                "reconnect_initial_s": 0.2,
                "reconnect_max_s": 1.0,
            },
            "ledger": {"path": tmp / "link.db"},
            "metrics": {"port": 0},
            "control": {"socket": tmp / "link.sock"},
            "log": {"format": "json"},
        }
    )
    hosts = json.dumps([f"127.0.0.1:{b.port}" for b in brokers])
    path = tmp / "link.toml"
    path.write_text(
        text.replace('"@TABLES@"', json.dumps(["t1", "t2"])).replace('"@HOSTS@"', hosts)
    )
    return path


class Table:
    """Table t1's broker session over the broker list, with an outbox resent until answered."""

    def __init__(self, brokers: list[LinkBroker]) -> None:
        section = MqttSection(
            hosts=[f"127.0.0.1:{b.port}" for b in brokers],
            username="t1",
            password=PASSWORDS["t1"],
            reconnect_initial_s=0.2,
            reconnect_max_s=1.0,
            keepalive_s=5,
        )
        self.session = MqttSession(section.broker_options("t1"))
        self.session.subscribe(TO_T1, self._received)
        self.results: dict[int, list[Result]] = {}
        self.waiting: dict[int, bytes] = {}
        self.ports_used: list[int] = []
        self.session.on_connect(self._connected)

    async def _connected(self) -> None:
        self.ports_used.append(self.session.options.port)

    async def _received(self, message: aiomqtt.Message) -> None:
        assert isinstance(message.payload, bytes)
        reply = decode_link(message.payload)
        if isinstance(reply, Result) and reply.status != "resend":  # resend: keep it
            self.results.setdefault(reply.seq, []).append(reply)
            self.waiting.pop(reply.seq, None)

    async def send(self, seq: int) -> None:
        self.waiting[seq] = encode(contribution(seq))
        await self._publish(self.waiting[seq])

    async def _publish(self, payload: bytes) -> None:
        with contextlib.suppress(aiomqtt.MqttError):  # not connected now: resent later
            await self.session.publish(FROM_T1, payload)

    async def resend(self) -> None:
        while True:
            await asyncio.sleep(0.4)
            for payload in list(self.waiting.values()):
                await self._publish(payload)


@pytest.fixture
async def brokers() -> AsyncIterator[list[LinkBroker]]:
    pair = [LinkBroker().start(), LinkBroker().start()]
    try:
        yield pair
    finally:
        for b in pair:
            with contextlib.suppress(Exception):
                b.stop()


def link_status(tmp: Path) -> dict[str, object] | None:
    try:
        status = request(tmp / "link.sock", {"action": "status"}, timeout=2).get("status")
    except (OSError, ValueError):
        return None
    return status if isinstance(status, dict) else None


async def test_a_table_whose_broker_dies_moves_to_the_other_and_is_answered(
    brokers: list[LinkBroker], tmp_path: Path
) -> None:
    config = write_config(tmp_path, brokers)
    assert [p for _, p in load_link_config(config).mqtt.endpoints()] == [b.port for b in brokers]
    subprocess.run(
        [*PROGRESSIVED, "init", "--config", str(config)], check=True, capture_output=True
    )
    log = (tmp_path / "link.log").open("wb")
    link = subprocess.Popen(
        [*PROGRESSIVED, "link", "--config", str(config)], stdout=log, stderr=log
    )
    table = Table(brokers)
    loop = asyncio.get_running_loop()
    session = loop.create_task(table.session.run())
    resender = loop.create_task(table.resend())
    try:

        def both_connected() -> bool:
            status = link_status(tmp_path)
            return status is not None and all(b["connected"] for b in status["brokers"])

        await until(both_connected, 30)
        await until(lambda: table.session.connected, 20)
        assert table.session.options.port == brokers[0].port  # the first of its list
        for seq in range(1, 6):
            await table.send(seq)
        await until(lambda: set(range(1, 6)) <= set(table.results), 20)
        brokers[0].stop(signal.SIGKILL)  # the table's broker dies
        for seq in range(6, 11):
            await table.send(seq)  # into the outbox while it moves
        await until(lambda: set(range(1, 11)) <= set(table.results), 30)
        assert table.session.options.port == brokers[1].port
        assert table.ports_used == [brokers[0].port, brokers[1].port]
        status = link_status(tmp_path)
        assert status is not None
        views = status["brokers"]
        assert isinstance(views, list)
        assert [v["connected"] for v in views] == [False, True]
        assert views[1]["broker"] == f"mqtt://127.0.0.1:{brokers[1].port}"
        # a sign given both brokers, the first dead, shows the linked meter from the second
        sign = await asyncio.create_subprocess_exec(
            *PROGRESSIVECTL,
            "sign",
            *("--broker", f"127.0.0.1:{brokers[0].port}"),
            *("--broker", f"127.0.0.1:{brokers[1].port}"),
            *("--link", "link-a", "--meter", "pmg", "--plain", "--count", "1"),
            *("--username", "sign-lobby", "--password", PASSWORDS["sign-lobby"]),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(sign.communicate(), 60)
        assert sign.returncode == 0, err.decode()
        assert "$" in out.decode(), out.decode()
    finally:
        resender.cancel()
        await table.session.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(session, 10)
        link.send_signal(signal.SIGTERM)
        assert link.wait(20) == 0
    applied = [int(str(r["seq"])) for r in ledger_rows(tmp_path / "link.db", "link_applied")]
    assert sorted(applied) == list(range(1, 11))  # each message once, over both brokers
    assert all(r[0].status == "applied" for r in table.results.values())


async def test_a_table_daemon_whose_broker_dies_moves_to_the_other(tmp_path: Path) -> None:
    """The table daemon itself (``progressived run``, ``[mqtt] hosts``) with the link
    controller on both brokers (anonymous test brokers): its first broker SIGKILLed, its
    next round's contribution is answered through the second."""
    (tmp_path / "table").mkdir()
    with Mosquitto() as second:
        async with rig_table(
            tmp_path / "table",
            linked_config(),
            board=simulator_factory(heartbeat_interval_s=0.2),
            sign="it-sign",
        ) as t:
            first = t.broker
            hosts = json.dumps([f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"])
            text = t.config.read_text()
            moved = re.sub(r'host = "127\.0\.0\.1"\nport = \d+\n', f"hosts = {hosts}\n", text)
            assert moved != text
            t.config.write_text(moved)
            link_dir = tmp_path / "link"
            link_dir.mkdir()
            config = link_dir / "link.toml"
            config.write_text(
                render_toml(
                    {
                        "link": {"id": "link-a", "tables": "@TABLES@", "heartbeat_s": 0.2},
                        "link.meters": [
                            {"id": "main", "paytable": "pmg-01", "rate": 0.03, "reserve_rate": 0}
                        ],
                        "mqtt": {"hosts": "@HOSTS@", "reconnect_initial_s": 0.2},
                        "ledger": {"path": link_dir / "link.db"},
                        "metrics": {"enabled": False},
                        "control": {"socket": link_dir / "link.sock"},
                        "log": {"format": "json"},
                    }
                )
                .replace('"@HOSTS@"', hosts)
                .replace('"@TABLES@"', json.dumps([TABLE]))
            )
            subprocess.run(
                [*PROGRESSIVED, "init", "--config", str(config)], check=True, capture_output=True
            )
            log = (link_dir / "link.log").open("wb")
            link = subprocess.Popen(
                [*PROGRESSIVED, "link", "--config", str(config)], stdout=log, stderr=log
            )
            try:
                await until(lambda: bool(link_status(link_dir)), 30)
                t.start_daemon()
                await t.online()
                await table_until(lambda: status(t)["link"]["up"], "the link heard", 30)
                await t.bets(1, 3)
                await t.press("LOCK")
                await t.sub.wait_event("round_locked")
                await table_until(
                    lambda: len(journal(t, "link_result")) == 1 and outbox_empty(t), "answered"
                )
                await t.press("RECON")
                await t.sub.wait_event("round_reconciled")
                first.stop(signal.SIGKILL)  # the table's broker dies (and the sign's)
                on_second = f'"broker": "mqtt://127.0.0.1:{second.port}"'
                await table_until(lambda: on_second in t.log_text(), "on the second broker", 30)
                await table_until(lambda: status(t)["link"]["up"], "the link heard again", 30)
                await t.bets(2)
                await t.press("LOCK")
                await table_until(lambda: len(journal(t, "round_locked")) == 2, "locked", 30)
                await table_until(
                    lambda: len(journal(t, "link_result")) == 2 and outbox_empty(t),
                    "answered through the second broker",
                    30,
                )
                assert "broker connection lost" in t.log_text()
            finally:
                link.send_signal(signal.SIGTERM)
                assert link.wait(20) == 0
    applied = [int(str(r["seq"])) for r in ledger_rows(link_dir / "link.db", "link_applied")]
    assert applied == [1, 2]
