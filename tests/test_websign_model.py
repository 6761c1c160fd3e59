"""The web sign's pure floor model: the docs/mqtt.md rules for signs, without a browser."""

from __future__ import annotations

import io
import json

from progressived.signs.broker import BrokerLogin
from progressived.signs.web.model import Floor, dollars
from progressived.signs.web.server import SignServer, sse

T = "progressive/table"


def msg(**data: object) -> bytes:
    return json.dumps(data).encode()


def meter(cents: int, seq: int, state: str = "open", table: str = "t1") -> bytes:
    return msg(cents=cents, display=dollars(cents), seq=seq, state=state, table=table, meter="m")


def test_dollars_are_exact_cents() -> None:
    assert dollars(100_045) == "$1,000.45" and dollars(5) == "$0.05" and dollars(-150) == "-$1.50"


def test_a_lower_seq_is_ignored_until_a_new_boot() -> None:
    floor = Floor()
    assert floor.receive(f"{T}/t1/status", msg(status="online", table="t1", boot="b1"), 0)
    assert floor.receive(f"{T}/t1/meter/main", meter(100_045, 10), 0) == "table/t1"
    assert floor.receive(f"{T}/t1/meter/main", meter(100_000, 9), 0) is None  # late, older
    shown = floor.sources["table/t1"].meters["main"]
    assert (shown.cents, shown.seq, shown.boot) == (100_045, 10, "b1")
    # The same run again (a reconnect) keeps the expectation; a new run resets it.
    floor.receive(f"{T}/t1/status", msg(status="online", table="t1", boot="b1"), 0)
    assert floor.receive(f"{T}/t1/meter/main", meter(100_000, 9), 0) is None
    floor.receive(f"{T}/t1/status", msg(status="online", table="t1", boot="b2"), 0)
    assert floor.receive(f"{T}/t1/meter/main", meter(100_000, 3), 0) == "table/t1"
    assert floor.sources["table/t1"].meters["main"].boot == "b2"


def test_garbage_and_foreign_topics_change_nothing() -> None:
    floor = Floor()
    for topic, payload in (
        (f"{T}/t1/meter/main", b"\xff"),
        (f"{T}/t1/meter/main", b"[1]"),
        (f"{T}/t1/meter/main", msg(cents="1", seq=1)),
        (f"{T}/t1/status", msg(status="maybe")),
        ("progressive/meter/main", meter(1, 1)),  # the old shared topic
        ("other/table/t1/meter/main", meter(1, 1)),
        (f"{T}/t1/something", msg(a=1)),
    ):
        assert floor.receive(topic, payload, 0) is None, topic
    assert all(not s.meters for s in floor.sources.values())


def award(kind: str, seq: int, **extra: object) -> bytes:
    base: dict[str, object] = {
        "kind": kind,
        "table": "t1",
        "seq": seq,
        "round": 4,
        "seat": 3,
        "hand": "akq-spades",
        "meter": "main",
        "cents": 100_045,
    }
    # every key docs/mqtt.md's schema requires of its kind (a sign ignores an event without)
    moved: dict[str, object] = {"meter_before_cents": 0, "meter_after_cents": 0}
    required: dict[str, dict[str, object]] = {
        "award_keyed": {**moved, "reset": True},
        "award_confirmed": {"by": "sup"},
        "award_approved": {"by": "sup"},
        "envy": {"from_seat": 1},
    }
    keys = required.get(kind, {**moved, "reason": "rejected"})
    return msg(**{**base, **keys, **extra})


def test_pending_then_banner_held_for_banner_s_then_gone() -> None:
    floor = Floor(banner_s=30)
    ev = f"{T}/t1/event"
    assert floor.receive(ev, award("award_keyed", 5), 0)
    src = floor.sources["table/t1"]
    assert [(a.seat, a.cents) for a in src.pending] == [(3, 100_045)]
    assert floor.receive(ev, award("award_keyed", 5), 1) is None  # a redelivery
    assert floor.receive(ev, award("award_confirmed", 6, by="sup"), 10)
    assert not src.pending
    shown = src.as_json(now=20)["banner"]
    assert shown is not None
    assert (shown["seat"], shown["display"], shown["remaining_ms"]) == (3, "$1,000.45", 20_000)
    assert src.as_json(now=40.001)["banner"] is None
    # A rejected keyed award leaves no PENDING behind.
    floor.receive(ev, award("award_keyed", 7, seat=2), 50)
    floor.receive(ev, award("award_rejected", 8, seat=2, reason="rejected"), 51)
    assert not src.pending


def test_envy_is_the_rounds_and_a_new_round_clears_it() -> None:
    floor = Floor()
    ev = f"{T}/t1/event"
    floor.receive(ev, award("envy", 9, seat=1, from_seat=3, cents=10_000), 0)
    floor.receive(ev, award("envy", 10, seat=5, from_seat=3, cents=10_000), 0)
    src = floor.sources["table/t1"]
    assert [(e["seat"], e["display"]) for e in src.envy] == [(1, "$100.00"), (5, "$100.00")]
    floor.receive(ev, msg(kind="round_locked", table="t1", seq=11, round=5, seat=0, seats=[1]), 0)
    assert src.envy == []


def test_closed_says_why_and_opens_again() -> None:
    floor = Floor()
    ev = f"{T}/t1/event"
    floor.receive(
        ev, msg(kind="table_closed", table="t1", seq=1, round=1, seat=0, reason="operator"), 0
    )
    floor.receive(
        ev, msg(kind="table_closed", table="t1", seq=2, round=1, seat=0, reason="board offline"), 0
    )
    src = floor.sources["table/t1"]
    assert src.why_closed() == "board offline; closed by an operator"
    floor.receive(
        ev, msg(kind="table_opened", table="t1", seq=3, round=1, seat=0, reason="board offline"), 0
    )
    assert src.why_closed() == "closed by an operator"
    floor.receive(f"{T}/t1/status", msg(status="offline", table="t1"), 0)
    assert src.why_closed() == "controller offline"


def test_several_tables_and_meters_on_one_floor() -> None:
    floor = Floor()
    floor.receive(f"{T}/t2/meter/main", meter(200, 1), 0)
    floor.receive(f"{T}/t1/meter/mini", meter(50, 1), 0)
    floor.receive(f"{T}/t1/meter/main", meter(100, 2), 0)
    snap = floor.snapshot(0)
    assert [s["key"] for s in snap] == ["table/t1", "table/t2"]
    assert [m["meter"] for m in snap[0]["meters"]] == ["main", "mini"]


def test_the_server_subscribes_status_first_and_frames_sse() -> None:
    one = SignServer(BrokerLogin(), tables=("a",))
    assert one.topics() == [  # never a wildcard: only the tables shown (docs/sign.md)
        "progressive/table/a/status",
        "progressive/table/a/meter/+",
        "progressive/table/a/event",
    ]
    two = SignServer(BrokerLogin(), tables=("a", "b"))
    assert two.topics()[:2] == ["progressive/table/a/status", "progressive/table/b/status"]
    assert sse("tick", {"a": 1}, 7) == b'id: 7\nevent: tick\ndata: {"a":1}\n\n'


def test_a_malformed_message_is_said_once_per_interval_and_changes_nothing() -> None:
    err, now = io.StringIO(), [0.0]
    server = SignServer(BrokerLogin(), tables=("t1",), err=err, clock=lambda: now[0])
    server.take(f"{T}/t1/meter/main", meter(100, 1))
    for _ in range(3):
        server.take(f"{T}/t1/meter/main", b"{not json")
    server.take(f"{T}/t1/event", msg(kind="envy", seq="x"))
    assert err.getvalue() == f"sign: ignored a malformed message on {T}/t1/meter/main: not JSON\n"
    assert server.ignored.held == 3  # counted, said with the next line after 10 s
    assert server.floor.sources["table/t1"].meters["main"].cents == 100
    now[0] = 11
    server.take(f"{T}/t1/status", msg(status="maybe"))
    assert err.getvalue().splitlines()[1] == (
        f"sign: ignored a malformed message on {T}/t1/status: status 'maybe' is neither "
        "online nor offline (3 more since the last line)"
    )


def test_the_banner_goes_when_the_winning_table_locks_its_next_round() -> None:
    floor = Floor(banner_s=30)
    ev = f"{T}/t1/event"
    floor.receive(ev, award("award_keyed", 5), 0)
    floor.receive(ev, award("award_confirmed", 6, by="sup"), 1)
    src = floor.sources["table/t1"]
    # A redelivered LOCK of the winning round itself keeps the banner...
    floor.receive(ev, msg(kind="round_locked", table="t1", seq=4, round=4, seat=0, seats=[3]), 2)
    assert src.as_json(now=2)["banner"] is not None
    # ...the next round's LOCK clears it well before its 30 s.
    floor.receive(ev, msg(kind="round_locked", table="t1", seq=7, round=5, seat=0, seats=[3]), 3)
    assert src.as_json(now=3)["banner"] is None


def test_a_late_sign_shows_the_pending_award_and_why_closed_from_the_retained_meter() -> None:
    """A sign that connects during a pending award or a closure gets no past events."""
    floor = Floor()
    floor.receive(f"{T}/t1/status", msg(status="online", table="t1", boot="b1"), 0)
    late = json.loads(meter(100_006, 19, state="pending"))
    late["pending"] = [{"seat": 3, "hand": "akq-spades", "cents": 100_045}]
    late["closed"] = ["operator"]
    assert floor.receive(f"{T}/t1/meter/main", msg(**late), 0) == "table/t1"
    src = floor.sources["table/t1"]
    assert [(a.meter, a.seat, a.hand, a.cents) for a in src.pending] == [
        ("main", 3, "akq-spades", 100_045)
    ]
    assert src.why_closed() == "closed by an operator"
    # The award_keyed of that same change, arriving after its meter, adds no second line.
    assert floor.receive(f"{T}/t1/event", award("award_keyed", 19), 0) is None
    assert len(src.pending) == 1
    # An older table_closed delivered after a meter that already lists the closures is old news.
    opened = json.loads(meter(100_006, 21))
    opened["pending"], opened["closed"] = [], []
    floor.receive(f"{T}/t1/meter/main", msg(**opened), 1)
    closed = msg(kind="table_closed", table="t1", seq=20, round=1, seat=0, reason="operator")
    assert floor.receive(f"{T}/t1/event", closed, 1) is None
    assert src.why_closed() == "" and src.pending == []


def test_an_unknown_meter_state_is_malformed_not_open() -> None:
    floor = Floor()
    floor.receive(f"{T}/t1/meter/main", meter(100, 1, state="closed"), 0)
    assert floor.receive(f"{T}/t1/meter/main", meter(200, 2, state="jackpot"), 0) is None
    assert "jackpot" in floor.problem
    shown = floor.sources["table/t1"].meters["main"]
    assert (shown.cents, shown.state) == (100, "closed")


def test_an_approved_split_award_no_longer_awaits_the_supervisor() -> None:
    floor = Floor()
    ev = f"{T}/t1/event"
    floor.receive(ev, award("award_keyed", 5), 0)
    assert floor.receive(ev, award("award_approved", 6, by="sup"), 1) == "table/t1"
    src = floor.sources["table/t1"]
    assert src.pending == [] and src.as_json(now=1)["banner"] is None  # not paid yet
