"""``progressived demo --tables N --ha``: the whole HA link on one machine, and its faults.

It starts the HA rig (:func:`progressived.testing.ha.link.ha_link`: 3 etcd members, 3
Patroni/PostgreSQL nodes replicated synchronously, two Mosquitto brokers with the floor's
accounts and ACL, two link controllers, one active and one fenced standby) and N real table
daemons (``progressived run``, each with its board simulator, ``[mqtt] hosts`` naming both
brokers). Then it plays: every table contributes; mid-round the primary database is
SIGKILLed (Patroni promotes its synchronous standby), then the active link controller (the
standby takes the lease), then the tables' broker (they move to the other): after each the
tables play on until the linked meter moves again. It ends with ``progressivectl link
reconcile`` of the link's ledger (read from the new primary) with every table's; with
``--headless`` the exit status is the reconciliation's.

This module starts the tables and watches the floor on both brokers;
:mod:`progressived.demo.ha_script` plays the acts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TextIO

import aiomqtt

from progressived.core.wirejson import MAX_MESSAGE, WireError, loads_object
from progressived.demo.link import (
    METER,
    DemoTable,
    Floor,
    Process,
    _init,
    narrate_event,
    show_meter,
    table_ids,
)
from progressived.testing.board import simulator
from progressived.testing.broker import find_mosquitto
from progressived.testing.config import RigConfig, write_config
from progressived.testing.ha.brokers import AclBroker
from progressived.testing.ha.link import LINK, SIGNS, HaLink
from progressived.testing.postgres import available
from progressived.testing.rig import PROGRESSIVED

PREFIX = "progressive"
SIGN = SIGNS[0]


def missing_packages() -> list[str]:
    """The Debian packages the HA demo needs and this machine lacks (found on ``PATH``, or
    PostgreSQL 15 in its Debian directory)."""
    have = {
        "postgresql-15": available(),
        "patroni": shutil.which("patroni") is not None,
        "etcd-server": shutil.which("etcd") is not None,
        "mosquitto": find_mosquitto() is not None and shutil.which("mosquitto_passwd") is not None,
    }
    return [package for package, found in have.items() if not found]


def ha_table_config(home: Path, table: str, link: HaLink) -> Path:
    """A PMG table whose meter is the link's, on both brokers with its own account."""
    rig = RigConfig(
        table=table,
        paytable="pmg-01",
        meter={"id": METER, "link": LINK},
        board={"heartbeat_interval_s": 0.5, "missed_heartbeats": 4, "reconnect_initial_s": 0.2},
        mqtt={"reconnect_initial_s": 0.2, "reconnect_max_s": 1.0},
        link={"id": LINK, "heartbeat_s": 0.5, "missed_heartbeats": 4},
        header=f"# written by progressived demo --ha ({table})",
    )
    path = write_config(home, rig, broker_host="127.0.0.1", broker_port=1883, link=home / "board")
    login = (
        f"hosts = {json.dumps(link.hosts)}\nusername = {json.dumps(table)}\n"
        f"password_file = {json.dumps(str(link.password_file(table)))}\n"
    )
    text = path.read_text()
    moved = re.sub(r'host = "127\.0\.0\.1"\nport = 1883\n', login, text)
    if moved == text:
        raise RuntimeError(f"{path}: no [mqtt] host to replace with the brokers")
    path.write_text(moved)
    return path


@contextlib.asynccontextmanager
async def ha_tables(
    work: Path, link: HaLink, count: int, out: TextIO
) -> AsyncIterator[list[DemoTable]]:
    """``count`` table daemons with their boards, started; stopped at exit."""
    tables: list[DemoTable] = []
    try:
        for table in table_ids(count):
            home = work / table
            home.mkdir(exist_ok=True)
            board = simulator(home / "board", seats=7, heartbeat_interval_s=0.5)
            await board.start()
            config = ha_table_config(home, table, link)
            _init(config, out, table)
            daemon = Process(
                table, [*PROGRESSIVED, "run", "--config", str(config)], home / "daemon.log"
            )
            tables.append(DemoTable(table, home, config, board, daemon))
        for t in tables:
            t.daemon.start()
        yield tables
    finally:
        for t in tables:
            t.daemon.stop()
            with contextlib.suppress(Exception):
                await t.board.stop()


async def watch_broker(broker: AclBroker, password: str, floor: Floor) -> None:
    """Watch as a sign does (the sign account) on one broker, connecting again while it is
    down: with one watcher per broker nothing is missed when the tables move."""
    while True:
        try:
            async with aiomqtt.Client(
                broker.host,
                broker.port,
                username=SIGN,
                password=password,
                identifier=SIGN,
                keepalive=2,
                timeout=2,
            ) as client:
                await client.subscribe(f"{PREFIX}/link/{LINK}/meter/#", qos=1)
                await client.subscribe(f"{PREFIX}/table/+/event", qos=1)
                async for message in client.messages:
                    _heard(floor, str(message.topic), message.payload)
        except aiomqtt.MqttError:
            await asyncio.sleep(0.5)


def _heard(floor: Floor, topic: str, payload: object) -> None:
    if not isinstance(payload, (bytes, bytearray)):
        return
    try:
        data = loads_object(payload, max_bytes=MAX_MESSAGE)
    except WireError:
        return
    if "/link/" in topic:
        show_meter(floor, data)
        return
    table = topic.split("/")[2]
    seen = floor.events.setdefault(table, [])
    if any(e.get("seq") == data.get("seq") for e in seen[-200:]):
        return  # heard on the other broker too, or a repeat after a reconnect
    seen.append(data)
    said = narrate_event(table, data)
    if said:
        floor.say(said)
