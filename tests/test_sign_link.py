"""Signs following a link: the linked meter's retained topic, ordered by (epoch, lseq), and
the winning table's banner — the terminal sign's view, the web sign's model, and the
terminal sign through a real Mosquitto."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys

import aiomqtt
import pytest

from progressived.signs.broker import BrokerLogin
from progressived.signs.link import LinkSignView
from progressived.signs.terminal import run_sign
from progressived.signs.web.model import Floor
from progressived.signs.web.server import SignServer
from progressived.testing.broker import Mosquitto

TOPIC = "progressive/link/link-a/meter/pmg"
UNITS_PER_CENT = 10_000


def linked(units: int, epoch: int, lseq: int, hit: dict[str, object] | None = None) -> bytes:
    return json.dumps(
        {
            "type": "meter",
            "link": "link-a",
            "meter": "pmg",
            "units": units,
            "epoch": epoch,
            "lseq": lseq,
            "head": {"seq": lseq, "hash": "0" * 64},
            "hit": hit,
        }
    ).encode()


HIT = {"table": "pmg-02", "seat": 5, "hand": "royal-flush", "units": 1_204_37 * UNITS_PER_CENT}


@pytest.mark.e2e
def test_the_terminal_view_never_goes_back_and_shows_the_winning_table() -> None:
    view = LinkSignView("progressive", "link-a", "pmg")
    assert view.receive(TOPIC, linked(1_000_000_000, 0, 3), now=0.0)
    assert view.plain() == "pmg $1,000.00 OPEN"
    assert not view.receive(TOPIC, linked(999_000_000, 0, 2), now=0.1)  # late: older lseq
    assert not view.receive(TOPIC, linked(1_000_000_000, 0, 3), now=0.2)  # a repeat
    assert view.receive(TOPIC, linked(1_000_050_000, 0, 9), now=0.3)
    # The claim: the meter resets (a new epoch) and the hit names the winning table.
    assert view.receive(TOPIC, linked(1_000_000_000, 1, 10, HIT), now=1.0)
    assert view.plain() == (
        "pmg $1,000.00 OPEN *** WINNER: table pmg-02 seat 5 royal-flush $1,204.37 ***"
    )
    assert "WINNER" in view.render(now=2.0) and "WINNER" not in view.render(now=40.0)
    # A message of the old epoch with a higher lseq is still older.
    assert not view.receive(TOPIC, linked(2_000_000_000, 0, 50), now=3.0)
    assert view.display == "$1,000.00"


@pytest.mark.e2e
def test_the_terminal_view_ignores_bad_messages_and_an_old_hit_on_start() -> None:
    view = LinkSignView("progressive", "link-a", "pmg")
    assert not view.receive(TOPIC, b"not json")
    assert not view.receive(TOPIC, b'{"link": "link-a", "units": 1.5, "epoch": 0, "lseq": 1}')
    assert not view.receive(TOPIC, b'{"link": "link-a", "units": true, "epoch": 0, "lseq": 1}')
    other = linked(5, 0, 1).replace(b'"link-a"', b'"link-b"')
    assert not view.receive(TOPIC, other)
    assert not view.receive("progressive/link/link-a/meter/other", linked(5, 0, 1))
    # The retained message a sign gets on start carries yesterday's hit: no banner for it.
    assert view.receive(TOPIC, linked(1_000_000_000, 4, 77, HIT), now=0.0)
    assert "WINNER" not in view.plain()


@pytest.mark.e2e
def test_the_web_model_shows_a_link_as_a_source_with_the_winner() -> None:
    floor = Floor("progressive", banner_s=30.0)
    assert floor.receive(TOPIC, linked(1_000_000_000, 0, 3), now=0.0) == "link/link-a"
    assert floor.receive(TOPIC, linked(999_000_000, 0, 2), now=0.1) is None
    assert floor.receive(TOPIC, linked(1_000_000_000, 1, 4, HIT), now=1.0) == "link/link-a"
    [src] = floor.snapshot(now=2.0)
    assert src["kind"] == "link" and src["meters"][0]["display"] == "$1,000.00"
    assert src["banner"]["table"] == "pmg-02" and src["banner"]["display"] == "$1,204.37"
    assert floor.receive(TOPIC, b'{"units": "x", "epoch": 0, "lseq": 9}', now=3.0) is None
    assert floor.problem
    # Only the linked meter topic means anything under a link.
    assert floor.receive("progressive/link/link-a/to/t1", linked(1, 9, 9), now=4.0) is None


def test_the_web_sign_subscribes_to_links_only_when_asked() -> None:
    login = BrokerLogin("127.0.0.1", 1883)
    assert not any("/link/" in t for t in SignServer(login).topics())
    both = SignServer(login, tables=("pmg-01",), links=("link-a",)).topics()
    assert "progressive/link/link-a/meter/+" in both
    assert "progressive/table/pmg-01/event" in both
    only = SignServer(login, links=("link-a",)).topics()
    assert only == ["progressive/link/link-a/meter/+"]


@pytest.mark.e2e
async def test_the_terminal_sign_follows_a_link_through_mosquitto(mosquitto: Mosquitto) -> None:
    out = io.StringIO()
    view = LinkSignView("progressive", "link-a", "pmg")
    login = BrokerLogin(mosquitto.host, mosquitto.port)
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        await client.publish(TOPIC, linked(1_000_000_000, 0, 1), qos=1, retain=True)
    sign = asyncio.create_task(
        run_sign(
            login,
            "progressive",
            "",
            "pmg",
            out=out,
            err=io.StringIO(),
            plain=True,
            count=2,
            view=view,
        )
    )
    await asyncio.sleep(0.5)
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        await client.publish(TOPIC, linked(1_000_000_000, 1, 2, HIT), qos=1, retain=True)
    assert await asyncio.wait_for(sign, 10) == 0
    assert out.getvalue().splitlines() == [
        "pmg $1,000.00 OPEN",
        "pmg $1,000.00 OPEN *** WINNER: table pmg-02 seat 5 royal-flush $1,204.37 ***",
    ]


@pytest.mark.e2e
def test_the_command_line_sign_of_a_link(mosquitto: Mosquitto) -> None:
    subprocess.run(
        [
            "mosquitto_pub",
            "-p",
            str(mosquitto.port),
            "-t",
            TOPIC,
            "-r",
            "-q",
            "1",
            "-m",
            linked(1_234_560_000, 2, 40).decode(),
        ],
        check=True,
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "progressived.cli.ctl",
            "sign",
            "--port",
            str(mosquitto.port),
            "--link",
            "link-a",
            "--plain",
            "--count",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pmg $1,234.56 OPEN"
    both = subprocess.run(
        [sys.executable, "-m", "progressived.cli.ctl", "sign", "--link", "link-a", "--table", "t"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert both.returncode == 2 and "one meter" in both.stderr
