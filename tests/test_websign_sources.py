"""Which tables the web sign shows, and what a flood from one account costs it (docs/sign.md,
"Which tables" and "Limits"): only the tables and links named (the sign file, ``--table``,
``--link``, or a controller's file with ``--from``), never one an account invents under its
own name; every list a publisher can grow is bounded; and a flood of junk from one account,
against a real Mosquitto, never costs the sign a real meter update.
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from contextlib import suppress
from pathlib import Path

import aiomqtt
import pytest

from progressived.signs.broker import BrokerLogin
from progressived.signs.web.look import SignConfig
from progressived.signs.web.model import MAX_ENVY, MAX_METERS
from progressived.signs.web.server import SignServer, serve
from progressived.signs.web.sources import looks_from_files, with_sources
from progressived.testing.broker import Mosquitto, free_port
from progressived.testing.waits import until
from tests.conftest import ROOT

T = "progressive/table"
FAKE = {"cents": 9_999_999_999, "display": "$99,999,999.99", "seq": 1, "state": "open",
        "table": "sign-lobby", "meter": "main"}  # fmt: skip


def meter(table: str, cents: int, seq: int, name: str = "main") -> bytes:
    body = {"cents": cents, "display": "$0.00", "seq": seq, "state": "open", "table": table,
            "meter": name}  # fmt: skip
    return json.dumps(body).encode()


def from_files(*paths: Path) -> SignServer:
    """A sign server as ``sign --web --from FILE...`` builds it."""
    config = with_sources(SignConfig(), looks_from_files(paths))
    return SignServer(BrokerLogin(), tables=config.shown("table"), links=config.shown("link"),
                      config=config, err=io.StringIO())  # fmt: skip


def test_a_table_nobody_named_is_never_shown_and_the_named_ones_have_their_paytable() -> None:
    sign = from_files(ROOT / "config" / "progressived.toml", ROOT / "config" / "link.toml")
    assert sign.tables == ("tcp-07", "uth-01", "uth-02") and sign.links == ("link-a",)
    assert sign.config.look("table", "tcp-07").paytable is not None  # tcp-sd-1: names, amounts
    assert sign.config.look("link", "link-a").paytable is not None  # pmg-01
    sign.take(f"{T}/sign-lobby/meter/main", json.dumps(FAKE).encode())
    sign.take(f"{T}/link-a/meter/main", json.dumps({**FAKE, "table": "link-a"}).encode())
    sign.take(f"{T}/tcp-07/meter/main", meter("tcp-07", 123_45, 1))
    assert [s["key"] for s in sign.snapshot()["sources"]] == ["table/tcp-07"]
    assert not [t for t in sign.topics() if "/table/+/" in t]  # only what is shown: no wildcard


def test_every_list_one_publisher_can_grow_is_bounded() -> None:
    sign = SignServer(BrokerLogin(), tables=("t1",), err=io.StringIO())
    for index in range(1500):
        sign.take(f"{T}/t1/meter/fake-{index}", meter("t1", 100, 1, f"fake-{index}"))
    for seq in range(2000):
        envy = {"kind": "envy", "table": "t1", "seq": seq + 1, "ts": "x", "round": 1, "seat": 1,
                "from_seat": 2, "hand": "royal-flush", "cents": 100}  # fmt: skip
        sign.take(f"{T}/t1/event", json.dumps(envy).encode())
    source = sign.floor.sources["table/t1"]
    assert len(source.meters) == MAX_METERS and len(source.envy) == MAX_ENVY
    assert len(sign.floor.sources) == 1


def test_with_nothing_named_the_sign_refuses_to_guess(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "progressived.cli.ctl", "sign", "--web", "--port", "1"],
        capture_output=True, text=True, timeout=30, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "name what this sign shows" in done.stderr


@pytest.mark.e2e
async def test_a_flood_from_one_account_costs_no_real_meter_update(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    table = tmp_path / "table.toml"
    table.write_text('[table]\nid = "t1"\npaytable = "tcp-sd-1"\n')
    sign = from_files(table)
    sign.login = BrokerLogin(port=mosquitto.port)
    real: list[int] = []
    take = sign.take

    def counting(topic: str, payload: bytes) -> None:
        if topic == f"{T}/t1/meter/main":
            real.append(json.loads(payload)["cents"])
        take(topic, payload)

    sign.take = counting
    port, ready = free_port(), asyncio.Event()
    task = asyncio.create_task(serve(sign, "127.0.0.1", port, ready))
    try:
        await until(lambda: sign.broker == "connected", "the sign connected")
        async with aiomqtt.Client("127.0.0.1", mosquitto.port) as junk:
            await junk.publish(f"{T}/sign-lobby/meter/main", json.dumps(FAKE), qos=1, retain=True)
            for step in range(5):
                for index in range(400):  # 2,000 envy events and 1,500 meter ids in all
                    envy = {"kind": "envy", "table": "sign-lobby", "seq": step * 400 + index}
                    await junk.publish(f"{T}/sign-lobby/event", json.dumps(envy), qos=1)
                    if index < 300:
                        fake = f"{T}/sign-lobby/meter/m{step * 300 + index}"
                        await junk.publish(fake, json.dumps(FAKE), qos=1)
                await junk.publish(f"{T}/t1/meter/main", meter("t1", 1000 + step, step + 1), qos=1)
        await until(lambda: len(real) == 5, "the five real meter updates")
        assert real == [1000, 1001, 1002, 1003, 1004]
        assert [s["key"] for s in sign.snapshot()["sources"]] == ["table/t1"]
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
