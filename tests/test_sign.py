"""The terminal sign: the pure view, and a real subscription through Mosquitto."""

from __future__ import annotations

import asyncio
import io
import json

import aiomqtt

from progressived.broker import Mosquitto
from progressived.sign import SignView, big, run_sign


def msg(**data: object) -> bytes:
    return json.dumps(data).encode()


def test_big_digits_render_every_character() -> None:
    text = big("$1,234.50")
    assert len(text.splitlines()) == 5
    assert "#" in text


def test_view_shows_meter_pending_closed_and_offline() -> None:
    view = SignView("progressive", "main")
    assert view.apply("progressive/meter/main", msg(display="$1,000.45", state="open", seq=3))
    assert view.plain() == "main $1,000.45 OPEN"
    view.apply("progressive/meter/main", msg(display="$1,000.00", state="pending", seq=4))
    assert "PENDING" in view.render()
    # An older value delivered late does not go back.
    assert not view.apply("progressive/meter/main", msg(display="$999.00", state="open", seq=2))
    assert view.display == "$1,000.00"
    view.apply("progressive/meter/main", msg(display="$1,000.00", state="closed", seq=5))
    assert "CLOSED" in view.render()
    view.apply("progressive/table/t1/status", msg(status="offline"))
    assert view.status_line() == "OFFLINE"


def test_view_banners_a_winner_once_and_ignores_garbage() -> None:
    view = SignView("progressive", "main")
    event = msg(
        kind="award_keyed", table="t7", seat=3, hand="akq-spades", cents=123456, meter="main", seq=9
    )
    assert view.apply("progressive/table/t7/event", event, now=0.0)
    assert "table t7 seat 3 akq-spades $1,234.56" in view.render(now=1.0)
    assert not view.apply("progressive/table/t7/event", event, now=2.0)  # repeat, same seq
    assert "WINNER" not in view.render(now=31.0)
    assert not view.apply("progressive/meter/main", b"\xff not json")
    assert not view.apply("progressive/meter/main", b"[1, 2]")


async def test_sign_subscribes_like_a_real_sign(mosquitto: Mosquitto) -> None:
    out = io.StringIO()
    sign = asyncio.create_task(
        run_sign(
            mosquitto.host, mosquitto.port, "progressive", "main", out=out, plain=True, count=2
        )
    )
    await asyncio.sleep(0.5)
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        await client.publish(
            "progressive/meter/main",
            msg(display="$1,500.00", state="open", seq=1),
            qos=1,
            retain=True,
        )
        await client.publish(
            "progressive/meter/main", msg(display="$1,500.25", state="pending", seq=2), qos=1
        )
    assert await asyncio.wait_for(sign, 10) == 0
    assert out.getvalue().splitlines() == ["main $1,500.00 OPEN", "main $1,500.25 PENDING"]
