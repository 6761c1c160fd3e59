"""The terminal sign: the pure view, and a real subscription through Mosquitto."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import aiomqtt

from progressived.mqtt.payloads import EVENT_KEYS
from progressived.mqtt.session import MqttSession
from progressived.mqtt.session import suback_refused as _refused
from progressived.signs.broker import EXIT_NOT_AUTHORISED, BrokerLogin
from progressived.signs.screen import HOME_CLEAR, Screen, redraw
from progressived.signs.terminal import SignView, _SignNotices, big, run_sign
from progressived.testing.broker import Mosquitto, free_port
from tests.doc_broker import PASSWORDS, DocBroker

METER = "progressive/table/t1/meter/main"


def msg(**data: object) -> bytes:
    return json.dumps(data).encode()


_EVENT_DEFAULTS: dict[str, object] = {
    "ts": "2026-11-21T19:05:01Z",
    "round": 1,
    "seat": 0,
    "seats": [],
    "hand": "akq",
    "meter": "main",
    "cents": 0,
    "meter_before_cents": 0,
    "meter_after_cents": 0,
    "reset": False,
    "by": "supervisor",
    "reason": "rejected",
}


def event_msg(**data: object) -> bytes:
    """A whole event message: the keys its kind requires (docs/mqtt.md), defaulted."""
    needed = ("ts", *EVENT_KEYS.get(str(data["kind"]), ()))
    return msg(**{k: _EVENT_DEFAULTS[k] for k in needed if k not in data}, **data)


def meter_msg(*, display: str, seq: int, state: str = "open", table: str = "t1") -> bytes:
    """A whole meter message (a sign ignores one without its keys, docs/mqtt.md)."""
    cents = int(display.lstrip("$").replace(",", "").replace(".", ""))
    return msg(
        cents=cents,
        display=display,
        meter="main",
        seq=seq,
        state=state,
        table=table,
        ts="2026-11-21T19:05:01Z",
    )


def test_big_digits_render_every_character() -> None:
    text = big("$1,234.50")
    assert len(text.splitlines()) == 5
    assert "#" in text


def test_view_shows_meter_pending_closed_and_offline() -> None:
    view = SignView("progressive", "main", "t1")
    assert view.receive(METER, meter_msg(display="$1,000.45", state="open", seq=3))
    assert view.plain() == "main $1,000.45 OPEN"
    view.receive(METER, meter_msg(display="$1,000.00", state="pending", seq=4))
    assert "PENDING" in view.render()
    # An older value delivered late does not go back.
    assert not view.receive(METER, meter_msg(display="$999.00", state="open", seq=2))
    assert view.display == "$1,000.00"
    view.receive(METER, meter_msg(display="$1,000.00", state="closed", seq=5))
    assert "CLOSED" in view.render()
    view.receive("progressive/table/t1/status", msg(status="offline", table="t1"))
    assert view.status_line() == "OFFLINE"


def test_view_shows_why_it_is_closed_and_a_linked_meter_waiting_for_its_link() -> None:
    view = SignView("progressive", "main", "t1")
    waiting = {**json.loads(meter_msg(display="$0.00", state="closed", seq=3))}
    waiting["closed"] = ["waiting for link"]
    assert view.receive(METER, msg(**waiting))
    assert view.plain() == "main ---- WAITING FOR THE LINK"  # no value yet: never $0.00
    assert "$" not in view.render() and "CLOSED" not in view.render()
    refused = {**waiting, "seq": 4, "closed": ["link refused: unknown-meter"]}
    assert view.receive(METER, msg(**{**refused, "display": "$1,000.00", "cents": 100000}))
    assert view.plain() == "main $1,000.00 CLOSED: link refused: unknown-meter"
    both = {**waiting, "seq": 5, "closed": ["board offline", "waiting for link"]}
    assert view.receive(METER, msg(**both))
    assert view.plain() == "main ---- CLOSED: board offline, waiting for link"
    assert view.receive(METER, meter_msg(display="$1,000.00", state="open", seq=6))
    assert view.plain() == "main $1,000.00 OPEN"


def test_view_banners_a_winner_once_and_ignores_garbage() -> None:
    view = SignView("progressive", "main", "t1")
    event = event_msg(
        kind="award_keyed", table="t1", seat=3, hand="akq-spades", cents=123456, meter="main", seq=9
    )
    assert view.receive("progressive/table/t1/event", event, now=0.0)
    assert "PENDING: table t1 seat 3 akq-spades $1,234.56" in view.render(now=1.0)
    assert "WINNER" not in view.render(now=1.0)  # keyed is not paid: it may still be rejected
    assert not view.receive("progressive/table/t1/event", event, now=2.0)  # repeat, same seq
    paid = msg(**{**json.loads(event), "kind": "award_confirmed", "seq": 10, "by": "sup"})
    assert view.receive("progressive/table/t1/event", paid, now=3.0)
    assert "WINNER: table t1 seat 3 akq-spades $1,234.56" in view.render(now=4.0)
    assert "WINNER" not in view.render(now=34.0)
    assert not view.receive(METER, b"\xff not json")
    assert not view.receive(METER, b"[1, 2]")


def test_view_reads_only_its_own_table() -> None:
    view = SignView("progressive", "main", "t1")
    assert view.receive(METER, meter_msg(display="$1,000.00", state="open", seq=3))
    # Another table's meter, its events and the old shared topic are not this sign's.
    assert not view.receive("progressive/table/t2/meter/main", meter_msg(display="$9.00", seq=99))
    assert not view.receive("progressive/meter/main", meter_msg(display="$9.00", seq=99))
    award = event_msg(
        kind="award_keyed", table="t2", seat=1, hand="x", cents=1, meter="main", seq=4
    )
    assert not view.receive("progressive/table/t2/event", award)
    assert not view.receive("progressive/table/t2/status", msg(status="offline"))
    assert view.display == "$1,000.00" and view.status_line() == ""


def test_a_new_boot_restarts_the_seq_expectation_and_the_same_boot_does_not() -> None:
    view = SignView("progressive", "main", "t1")
    status = "progressive/table/t1/status"
    view.receive(status, msg(status="online", table="t1", boot="b1"))
    assert view.receive(
        METER, meter_msg(display="$9,999,999.00", state="open", seq=10**12)
    )  # stale/forged
    assert not view.receive(METER, meter_msg(display="$1,000.00", state="open", seq=7))
    # Reconnecting to the same run (retained status again) keeps the expectation...
    view.receive(status, msg(status="online", table="t1", boot="b1"))
    assert not view.receive(METER, meter_msg(display="$1,000.00", state="open", seq=7))
    # ...its offline will does not reset it; the next run's online status does.
    view.receive(status, msg(status="offline", table="t1", boot="b1"))
    assert not view.receive(METER, meter_msg(display="$1,000.00", state="open", seq=7))
    view.receive(status, msg(status="online", table="t1", boot="b2"))
    assert view.receive(METER, meter_msg(display="$1,000.00", state="open", seq=7))
    assert view.display == "$1,000.00"
    assert not view.receive(METER, meter_msg(display="$999.00", state="open", seq=6))


def test_waiting_says_for_what() -> None:
    view = SignView("progressive", "main", "t1")
    view.waiting_for = f"a controller to publish {METER} on mqtt://127.0.0.1:1883"
    assert f"waiting for a controller to publish {METER} on mqtt://127.0.0.1:1883" in view.render()


async def test_sign_subscribes_like_a_real_sign(mosquitto: Mosquitto) -> None:
    out, err = io.StringIO(), io.StringIO()
    login = BrokerLogin(mosquitto.host, mosquitto.port)
    sign = asyncio.create_task(
        run_sign(login, "progressive", "t1", "main", out=out, err=err, plain=True, count=2)
    )
    await asyncio.sleep(0.5)
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        await client.publish(
            METER,
            meter_msg(display="$1,500.00", state="open", seq=1),
            qos=1,
            retain=True,
        )
        await client.publish(METER, meter_msg(display="$1,500.25", state="pending", seq=2), qos=1)
    assert await asyncio.wait_for(sign, 10) == 0
    assert out.getvalue().splitlines() == ["main $1,500.00 OPEN", "main $1,500.25 PENDING"]


def test_winner_banner_clears_when_that_table_locks_its_next_round() -> None:
    view = SignView("progressive", "main", "t7")
    win = event_msg(
        kind="award_confirmed",
        table="t7",
        seat=3,
        hand="akq-spades",
        cents=100045,
        meter="main",
        seq=2,
    )
    view.receive(
        "progressive/table/t7/event", event_msg(kind="round_locked", table="t7", seq=1), now=0.0
    )
    assert view.receive("progressive/table/t7/event", win, now=1.0)
    assert "WINNER" in view.plain()
    # Another table's LOCK (a linked meter) leaves the banner: it is not this winner's round.
    other = event_msg(kind="round_locked", table="t8", seq=2, round=4)
    view.receive("progressive/table/t8/event", other, now=2.0)
    assert "WINNER" in view.render(now=2.0)
    # The winning table's next round: the banner goes at once, well before its 30 s.
    nxt = event_msg(kind="round_locked", table="t7", seq=3, round=2)
    assert view.receive("progressive/table/t7/event", nxt, now=3.0)
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
    login = BrokerLogin(mosquitto.host, mosquitto.port)
    sign = asyncio.create_task(
        run_sign(login, "progressive", "t1", "main", out=out, err=io.StringIO(), count=2)
    )
    await asyncio.sleep(0.5)
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        for seq, display in ((1, "$1,500.00"), (2, "$1,500.25")):
            payload = meter_msg(display=display, state="open", seq=seq)
            await client.publish(METER, payload, qos=1)
    assert await asyncio.wait_for(sign, 10) == 0
    text = out.getvalue()
    assert "\x1b" not in text
    # the waiting frame, then both meter frames, one after the other
    assert text.count("progressive main") == 3
    assert text.index("waiting for a controller") < text.index(big("$1,500.00"))
    assert text.index(big("$1,500.00")) < text.index(big("$1,500.25"))


def test_redraw_draws_over_the_last_frame_only_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert redraw("frame", Terminal()) == HOME_CLEAR + "frame\n"
    assert redraw("frame", io.StringIO()) == "frame\n"


async def test_with_no_controller_the_sign_says_what_it_waits_for() -> None:
    with DocBroker() as broker:
        out, err = io.StringIO(), io.StringIO()
        login = BrokerLogin(broker.host, broker.port, "sign-lobby", PASSWORDS["sign-lobby"])
        sign = asyncio.create_task(
            run_sign(login, "progressive", "tcp-07", "main", out=out, err=err)
        )
        await asyncio.sleep(1.0)
        assert not sign.done()
        sign.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sign
    expected = (
        "waiting for a controller to publish progressive/table/tcp-07/meter/main "
        f"on mqtt://127.0.0.1:{broker.port}"
    )
    assert err.getvalue() == f"sign: connected; {expected}\n"
    assert expected in out.getvalue()  # and the screen is not blank


async def test_a_refused_login_is_not_authorised_not_unreachable() -> None:
    with DocBroker() as broker:
        for user, password in (("sign-lobby", "wrong"), (None, None)):
            err = io.StringIO()
            login = BrokerLogin(broker.host, broker.port, user, password)
            status = await asyncio.wait_for(
                run_sign(login, "progressive", "tcp-07", "main", out=io.StringIO(), err=err), 10
            )
            assert status == EXIT_NOT_AUTHORISED
            lines = err.getvalue().splitlines()
            assert len(lines) == 1 and "not authorised" in lines[0], lines
            assert "unreachable" not in lines[0]
            assert (f"user {user!r}" if user else "an anonymous sign") in lines[0]


def test_a_failed_suback_counts_as_refused() -> None:
    # Mosquitto's acl_file grants any subscription and then delivers nothing the ACL denies;
    # a broker that answers 0x80 (or an MQTT 5 failure code) is reported as not authorised.
    assert _refused([128]) and _refused((0x87,)) and not _refused([1]) and not _refused(0)


async def test_an_unreachable_broker_is_retried_and_said_once() -> None:
    err = io.StringIO()
    port = free_port()  # nothing listens here
    login = BrokerLogin("127.0.0.1", port, "sign-lobby", "pw")
    sign = asyncio.create_task(
        run_sign(login, "progressive", "t1", "main", out=io.StringIO(), err=err, reconnect_s=0.1)
    )
    await asyncio.sleep(1.0)
    assert not sign.done()  # still retrying
    sign.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sign
    lines = err.getvalue().splitlines()
    assert len(lines) == 1, lines  # once per outage, not once per attempt
    assert lines[0].startswith(f"sign: broker mqtt://127.0.0.1:{port} unreachable (")
    assert lines[0].endswith("); retrying (every 0.1s, backing off to 30s)")
    assert "Connection refused" in lines[0]


def sign_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "progressived.cli.ctl", "sign", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **(env or {})},
    )


async def test_the_command_takes_the_password_from_a_file_or_the_environment(
    tmp_path: Path,
) -> None:
    with DocBroker() as broker:
        async with aiomqtt.Client(
            broker.host, broker.port, username="tcp-07", password=PASSWORDS["tcp-07"]
        ) as controller:
            await controller.publish(
                "progressive/table/tcp-07/meter/main",
                meter_msg(display="$1,000.45", state="open", seq=3, table="tcp-07"),
                qos=1,
                retain=True,
            )
        base = ["--port", str(broker.port), "--table", "tcp-07", "--username", "sign-lobby"]
        secret = tmp_path / "sign.pw"
        secret.write_text(PASSWORDS["sign-lobby"] + "\n")
        ok = await asyncio.to_thread(
            sign_cli, *base, "--password-file", str(secret), "--plain", "--count", "1"
        )
        assert (ok.returncode, ok.stdout) == (0, "main $1,000.45 OPEN\n"), ok.stderr
        env_ok = await asyncio.to_thread(
            sign_cli,
            *base,
            "--plain",
            "--count",
            "1",
            env={"PROGRESSIVE_SIGN_PASSWORD": PASSWORDS["sign-lobby"]},
        )
        assert (env_ok.returncode, env_ok.stdout) == (0, "main $1,000.45 OPEN\n"), env_ok.stderr
        wrong = await asyncio.to_thread(sign_cli, *base, env={"PROGRESSIVE_SIGN_PASSWORD": "wrong"})
        assert wrong.returncode == 3
        assert wrong.stderr.count("\n") == 1 and "not authorised" in wrong.stderr
        missing = await asyncio.to_thread(
            sign_cli, *base, "--password-file", str(tmp_path / "nope")
        )
        assert missing.returncode == 2
        assert missing.stderr == (
            f"progressivectl sign: cannot read the password file {tmp_path / 'nope'}: "
            "No such file or directory\n"
        )
        no_ca = await asyncio.to_thread(sign_cli, *base, "--cafile", str(tmp_path / "ca.pem"))
        assert no_ca.returncode == 2 and "TLS CA file" in no_ca.stderr


async def test_tls_with_the_brokers_ca_and_a_clear_line_without_it() -> None:
    with DocBroker(tls=True) as broker:
        ca = broker.ca
        tls = aiomqtt.TLSParameters(ca_certs=str(ca))
        async with aiomqtt.Client(
            broker.host,
            broker.port,
            username="tcp-07",
            password=PASSWORDS["tcp-07"],
            tls_params=tls,
        ) as controller:
            await controller.publish(
                "progressive/table/tcp-07/meter/main",
                meter_msg(display="$1,000.45", state="open", seq=3, table="tcp-07"),
                qos=1,
                retain=True,
            )
        base = ["--port", str(broker.port), "--table", "tcp-07", "--username", "sign-lobby"]
        env = {"PROGRESSIVE_SIGN_PASSWORD": PASSWORDS["sign-lobby"]}
        ok = await asyncio.to_thread(
            sign_cli, *base, "--cafile", str(ca), "--plain", "--count", "1", env=env
        )
        assert (ok.returncode, ok.stdout) == (0, "main $1,000.45 OPEN\n"), ok.stderr
        # Without the broker's CA the handshake fails: said (once), and retried.
        err = io.StringIO()
        login = BrokerLogin(
            broker.host, broker.port, "sign-lobby", PASSWORDS["sign-lobby"], tls=True
        )
        sign = asyncio.create_task(
            run_sign(login, "progressive", "tcp-07", "main", out=io.StringIO(), err=err)
        )
        await asyncio.sleep(1.5)
        assert not sign.done()
        sign.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sign
    lines = err.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"sign: broker mqtts://127.0.0.1:{broker.port} unreachable (")
    assert "CERTIFICATE_VERIFY_FAILED" in lines[0]


def test_a_pending_banner_goes_when_the_award_is_turned_off() -> None:
    view = SignView("progressive", "main", "t1")
    keyed = event_msg(
        kind="award_keyed", table="t1", seat=3, hand="akq", cents=500, meter="main", seq=4
    )
    view.receive("progressive/table/t1/event", keyed, now=0.0)
    assert "PENDING: table t1 seat 3 akq $5.00" in view.plain()
    off = event_msg(
        kind="award_unkeyed", table="t1", seat=3, hand="akq", cents=500, meter="main", seq=5
    )
    assert view.receive("progressive/table/t1/event", off, now=1.0)
    assert "PENDING" not in view.render(now=1.0)


def test_the_view_ignores_malformed_meters_and_events_whole() -> None:
    """docs/mqtt.md, "Malformed messages": the last good value stays; nothing crashes."""
    view = SignView("progressive", "main", "t1")
    assert view.receive(METER, meter_msg(display="$5.00", seq=3))
    good = json.loads(meter_msg(display="$6.00", seq=4))
    for bad in (
        {**good, "state": "jackpot"},
        {**good, "display": "6 dollars"},
        {**good, "table": "t2"},
        {**good, "meter": "mini"},
        {**good, "cents": "600"},
    ):
        assert not view.receive(METER, msg(**bad)), bad
    assert (view.display, view.state, view.seq) == ("$5.00", "open", 3)
    event = "progressive/table/t1/event"
    assert not view.receive(event, msg(kind="award_keyed", seq="x"))  # used to raise ValueError
    short = json.loads(event_msg(kind="award_confirmed", table="t1", seat=3, meter="main", seq=5))
    del short["cents"]
    assert not view.receive(event, msg(**short))
    assert view.banner == ""
    # An unknown kind is no error: ignored (changes nothing).
    assert not view.receive(event, event_msg(kind="new_kind", table="t1", seq=6))


def test_a_sign_that_lost_its_broker_says_so_never_that_the_table_is_offline() -> None:
    view = SignView("progressive", "main", "t1")
    view.receive("progressive/table/t1/status", msg(status="online", table="t1", boot="b"))
    view.receive(METER, meter_msg(display="$1,000.45", state="open", seq=3))
    notices = _SignNotices(BrokerLogin(), view, lambda line: None, "t1")
    session = MqttSession(BrokerLogin(port=1).options())
    notices.disconnected(session, 1.0)
    assert view.status_line().startswith("NOT LIVE") and "OFFLINE" not in view.render()
    assert view.display == "$1,000.45"  # the last value, said to be possibly old
    notices.connected(session)
    assert view.status_line() == ""
