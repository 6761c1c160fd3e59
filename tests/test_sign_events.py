"""One reading of events for both signs (progressived/signs/events.py): checked as docs/mqtt.md
says, typed (a sign decides from :class:`Shows`, never from text), redeliveries recognised
with a bounded memory on the terminal sign as on the web sign, and the one log throttle."""

from __future__ import annotations

import json
from typing import Any

import aiomqtt
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode

from progressived.mqtt.client import Ending, ending
from progressived.runtime.ratelimit import RateLimitedLog
from progressived.signs.events import (
    SEEN_EVENTS_KEPT,
    IgnoredLog,
    Malformed,
    SeenEvents,
    Shows,
    read_event,
)
from progressived.signs.terminal import SignView
from progressived.signs.web.model import Floor

T = "progressive/table"


def event(kind: str, seq: int, **extra: Any) -> dict[str, Any]:
    """A complete event of ``kind`` on table t1 (every key docs/mqtt.md's schema requires)."""
    base: dict[str, Any] = {"kind": kind, "table": "t1", "seq": seq, "ts": "t", "round": 4}
    base["seat"] = 3
    award = {"hand": "akq-spades", "meter": "main", "cents": 100_045}
    moved = {**award, "meter_before_cents": 100_045, "meter_after_cents": 100_000}
    keys: dict[str, dict[str, Any]] = {
        "award_keyed": {**moved, "reset": True},
        "award_confirmed": {**award, "by": "sup"},
        "award_approved": {**award, "by": "sup"},
        "award_rejected": {**moved, "reason": "rejected"},
        "award_unkeyed": {**moved, "reason": "unkeyed"},
        "award_reversed": {**moved, "reason": "voided"},
        "round_locked": {"seats": [3]},
        "envy": {"hand": "flush", "from_seat": 3, "cents": 10_000},
        "table_closed": {"reason": "operator"},
        "table_opened": {"reason": "operator"},
    }
    return {**base, **keys.get(kind, {}), **extra}


def raw(data: dict[str, Any]) -> bytes:
    return json.dumps(data).encode()


@pytest.mark.parametrize("shows", list(Shows))
def test_every_kind_a_sign_shows_is_read_into_its_type(shows: Shows) -> None:
    read = read_event(event(shows.value, 7), "t1")
    assert read is not None and read.shows is shows and read.seq == 7 and read.round == 4


def test_a_kind_a_sign_does_not_show_is_no_error() -> None:
    assert read_event(event("tray_paid", 1, hand="flush", cents=5), "t1") is None
    assert read_event(event("something_new", 1), "t1") is None


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({**event("award_confirmed", 1), "seq": "1"}, "an event needs an integer seq"),
        (event("award_confirmed", 1, table="t2"), "its table is not the topic's"),
        ({k: v for k, v in event("award_confirmed", 1).items() if k != "by"}, "without by"),
        (event("award_confirmed", 1, cents="100"), "whose cents is not an integer"),
        (event("award_confirmed", 1, seat=True), "whose seat is not an integer"),
        (event("table_closed", 1, reason=None), "whose reason is not a string"),
    ],
)
def test_a_malformed_event_is_refused_by_both_signs_alike(data: dict[str, Any], words: str) -> None:
    with pytest.raises(Malformed, match=words):
        read_event(data, "t1")
    view = SignView("progressive", "main", "t1")
    assert not view.receive(f"{T}/t1/event", raw(data), now=0)
    assert words in view.problem and not view.banner
    floor = Floor()
    assert floor.receive(f"{T}/t1/event", raw(data), 0) is None
    assert words in floor.problem
    assert floor.sources["table/t1"].banner is None


def test_the_terminal_banner_follows_the_events_type() -> None:
    view = SignView("progressive", "main", "t1")
    ev = f"{T}/t1/event"
    assert view.receive(ev, raw(event("award_keyed", 1)), now=0)
    assert view.banner_shows is Shows.PENDING and view.banner.startswith("*** PENDING: table t1")
    # An award reversed takes a PENDING banner down: decided by the banner's type, so a
    # PENDING look-alike text put up by something else is not matched.
    assert view.receive(ev, raw(event("award_reversed", 2)), now=1)
    assert view.banner == "" and view.banner_shows is None
    assert view.receive(ev, raw(event("award_confirmed", 3)), now=2)
    assert view.banner_shows is Shows.WINNER
    assert not view.receive(ev, raw(event("award_unkeyed", 4)), now=3)  # a WINNER stays
    assert view.banner_shows is Shows.WINNER
    assert view.receive(ev, raw(event("round_locked", 5, round=5)), now=4)
    assert view.banner == ""


def test_the_terminal_signs_seen_events_are_bounded_as_the_web_signs() -> None:
    view, floor = SignView("progressive", "main", "t1"), Floor()
    ev = f"{T}/t1/event"
    for seq in range(1, SEEN_EVENTS_KEPT + 501):
        data = raw(event("envy", seq, round=seq))
        view.receive(ev, data, now=0)
        floor.receive(ev, data, 0)
    assert len(view.seen_events) == SEEN_EVENTS_KEPT  # was a set that grew without bound
    assert len(floor.sources["table/t1"].seen) == SEEN_EVENTS_KEPT
    assert 500 not in view.seen_events and SEEN_EVENTS_KEPT + 500 in view.seen_events
    # A redelivery of a recent event is recognised by both.
    again = raw(event("award_confirmed", SEEN_EVENTS_KEPT + 500))
    assert not view.receive(ev, again, now=0)
    assert floor.receive(ev, again, 0) is None


def test_seen_events_forget_the_oldest_first() -> None:
    seen = SeenEvents(kept=3)
    assert [seen.first(s) for s in (1, 2, 3, 2, 4)] == [True, True, True, False, True]
    assert 1 not in seen and len(seen) == 3
    assert seen.first(1)  # forgotten: taken as new


def test_the_ignored_line_is_said_at_most_every_ten_seconds_with_the_count() -> None:
    now, said = [0.0], []
    log = IgnoredLog(said.append, clock=lambda: now[0])
    assert log.ignored("a", "not JSON")
    assert not log.ignored("a", "not JSON") and not log.ignored("b", "x")
    assert log.held == 2
    now[0] = 9.9
    assert not log.ignored("c", "y")
    now[0] = 10.0
    assert log.ignored("d", "why")
    assert said == [
        "sign: ignored a malformed message on a: not JSON",
        "sign: ignored a malformed message on d: why (3 more since the last line)",
    ]


def test_the_log_throttle_keeps_a_window_per_kind_and_tells_what_it_held() -> None:
    now = [0.0]
    lines: list[tuple[str, dict[str, Any]]] = []

    class Logger:
        def warning(self, event: str, **fields: Any) -> None:
            lines.append((event, fields))

    limit = RateLimitedLog(2, 60.0, logger=Logger(), clock=lambda: now[0], max_kinds=2)
    said = [limit.warning("a", per="a") for _ in range(5)]
    assert said == [True, True, False, False, False]
    assert limit.warning("b", per="b")  # another kind: its own window
    now[0] = 60.0
    assert limit.warning("a", per="a", n=1)
    assert lines[-1] == ("a", {"n": 1, "suppressed_before": 3})
    assert limit.suppressed == 3
    limit.warning("c", per="c")  # a third kind: the oldest remembered one is forgotten
    assert len(limit._windows) == 2
    limit.forget("c")
    assert limit.held("c") == 0


def _code_error(identifier: int) -> aiomqtt.MqttCodeError:
    return aiomqtt.MqttCodeError(ReasonCode(PacketTypes.DISCONNECT, identifier=identifier))


def test_why_a_connection_ended_is_a_type() -> None:
    assert ending(_code_error(0x8D)) is Ending.KEEPALIVE  # Keep alive timeout
    assert ending(_code_error(0x80)) is Ending.CLOSED  # Unspecified error, not on connect
    assert ending(OSError(111, "Connection refused")) is Ending.FAILED
