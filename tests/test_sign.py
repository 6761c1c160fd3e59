"""The terminal sign: the pure view, and a real subscription through Mosquitto."""

from __future__ import annotations

import asyncio
import io
import json
import os

import aiomqtt

from progressived.broker import Mosquitto
from progressived.sign import SignView, big, run_sign
from progressived.sign_screen import HOME_CLEAR, Screen, redraw


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


def test_winner_banner_clears_when_that_table_locks_its_next_round() -> None:
    view = SignView("progressive", "main")
    win = msg(
        kind="award_keyed", table="t7", seat=3, hand="akq-spades", cents=100045, meter="main", seq=2
    )
    view.apply("progressive/table/t7/event", msg(kind="round_locked", table="t7", seq=1), now=0.0)
    assert view.apply("progressive/table/t7/event", win, now=1.0)
    assert "WINNER" in view.plain()
    # Another table's LOCK (a linked meter) leaves the banner: it is not this winner's round.
    other = msg(kind="round_locked", table="t8", seq=2, round=4)
    view.apply("progressive/table/t8/event", other, now=2.0)
    assert "WINNER" in view.render(now=2.0)
    # The winning table's next round: the banner goes at once, well before its 30 s.
    nxt = msg(kind="round_locked", table="t7", seq=3, round=2)
    assert view.apply("progressive/table/t7/event", nxt, now=3.0)
    assert "WINNER" not in view.render(now=3.0)
    assert view.plain() == "main ---- waiting..."


def test_screen_on_a_terminal_redraws_in_place_and_fits_the_height() -> None:
    out = io.StringIO()
    screen = Screen(
        out,
        tty=True,
        header="control socket /x",
        footer="> ",
        size=lambda: os.terminal_size((40, 16)),
    )
    screen.sign("progressive main\n" + big("$1.00"))  # 6 rows
    for number in range(30):
        screen.say(f"line {number}")
    assert screen.draw()
    assert not screen.draw()  # nothing new: nothing written
    screen.say("x" * 70)  # two rows at 40 columns
    assert screen.draw()
    frames = out.getvalue().split(HOME_CLEAR)
    assert frames[0] == "" and len(frames) == 3  # each draw starts at home and clears
    last = frames[2]
    assert last.startswith("control socket /x\n\nprogressive main\n")
    assert last.endswith("x" * 70 + "\n> ")
    rows = sum(max(1, -(-len(row) // 40)) for row in last.split("\n"))
    assert rows == 16  # the whole screen, nothing scrolls
    assert "line 29" in last and "line 0\n" not in last  # the newest lines are the ones kept


def test_screen_elsewhere_appends_plain_frames_without_escapes() -> None:
    out = io.StringIO()
    screen = Screen(out, tty=False, header="control socket /x", footer="> ")
    screen.sign("main $1.00 OPEN")
    screen.say("board: lights 3=bet")
    screen.draw()
    screen.say("seat 3 keyed straight")
    screen.draw()  # the sign did not change: not repeated
    screen.sign("main $1.15 OPEN")
    screen.draw()
    assert "\x1b" not in out.getvalue()
    assert out.getvalue().splitlines() == [
        "main $1.00 OPEN",
        "board: lights 3=bet",
        "seat 3 keyed straight",
        "main $1.15 OPEN",
    ]


def test_screen_is_plain_when_output_is_not_a_terminal() -> None:
    assert not Screen(io.StringIO()).tty


def test_screen_redraws_when_the_prompt_appears() -> None:
    out = io.StringIO()
    screen = Screen(out, tty=True, size=lambda: os.terminal_size((80, 24)))
    screen.sign("main $1.00")
    screen.draw()
    screen.footer = "type board commands\n> "
    assert screen.draw()
    assert out.getvalue().endswith("type board commands\n> ")


async def test_sign_not_on_a_terminal_appends_frames_without_escapes(mosquitto: Mosquitto) -> None:
    out = io.StringIO()  # not a terminal, e.g. `progressivectl sign > sign.log`
    sign = asyncio.create_task(
        run_sign(mosquitto.host, mosquitto.port, "progressive", "main", out=out, count=2)
    )
    await asyncio.sleep(0.5)
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        for seq, display in ((1, "$1,500.00"), (2, "$1,500.25")):
            payload = msg(display=display, state="open", seq=seq)
            await client.publish("progressive/meter/main", payload, qos=1)
    assert await asyncio.wait_for(sign, 10) == 0
    text = out.getvalue()
    assert "\x1b" not in text
    assert text.count("progressive main") == 2  # both frames, one after the other
    assert text.index(big("$1,500.00")) < text.index(big("$1,500.25"))


def test_redraw_draws_over_the_last_frame_only_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert redraw("frame", Terminal()) == HOME_CLEAR + "frame\n"
    assert redraw("frame", io.StringIO()) == "frame\n"
