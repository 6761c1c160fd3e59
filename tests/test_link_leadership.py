"""The lease as a link controller reckons it (progressived/link/runtime/leadership.py) and
the broker list's parsing (``[mqtt] hosts``, ``progressivectl sign --broker``): the rules
docs/link.md, "The standby controller and two brokers", and docs/mqtt.md, "Two brokers",
state, on fake clocks and plain values."""

from __future__ import annotations

import argparse

import pytest
from pydantic import ValidationError

from progressived.cli import sign_cmd
from progressived.ledger import LeaseHeld
from progressived.link.runtime.leadership import Leadership, LeaseState, Role, role_of
from progressived.mqtt.client import broker_address
from progressived.mqtt.config import MqttSection
from progressived.signs.broker import LoginError
from progressived.storage.port import Lease


class Clock:
    def __init__(self) -> None:
        self.mono, self.wall = 100.0, 1_800_000_000.0

    def step(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += seconds


def lead(clock: Clock, me: str | None = "ctl-a", lease_s: float = 10.0) -> Leadership:
    return Leadership(me, lease_s, monotonic=lambda: clock.mono, wall=lambda: clock.wall)


def test_an_active_controller_holds_only_within_the_term_counted_from_before_the_acquire() -> None:
    clock = Clock()
    c = lead(clock)
    assert c.role == Role.STANDBY and not c.holds()
    started = clock.mono
    clock.step(0.5)  # the acquire's round trip
    c.activated(Lease("ctl-a", 7, clock.wall + 10, 10.0), started)
    assert c.role == Role.ACTIVE and c.token == 7 and c.changes == 1
    clock.step(9.4)
    assert c.holds()  # 9.9 s after the acquire was sent
    clock.step(0.2)
    assert not c.holds()  # its own term passed: no publish, no connection
    renewal = clock.mono
    c.extended(renewal - 5.0)  # a renewal counts from when it was sent, not when it returned
    assert c.term_left_s() == pytest.approx(5.0)
    c.extended(renewal - 8.0)  # an older one (a slow commit) never shortens the term
    assert c.term_left_s() == pytest.approx(5.0)
    c.extended(renewal)
    assert c.holds() and c.term_left_s() == pytest.approx(10.0)


def test_a_standby_remembers_whose_lease_it_is_and_polls_before_it_lapses() -> None:
    clock = Clock()
    c = lead(clock, lease_s=10.0)
    held = LeaseHeld("leased", holder="ctl-b", token=3, expires_in_s=0.2)
    c.waiting(held)
    assert (c.role, c.holder, c.token) == (Role.STANDBY, "ctl-b", 3)
    assert c.expires_at == pytest.approx(clock.wall + 0.2)
    assert c.poll_s(held) == pytest.approx(0.25)  # just after it lapses
    assert c.poll_s(LeaseHeld("x", expires_in_s=9.0)) == 1.0  # at least every second
    assert lead(clock, lease_s=2.0).poll_s(None) == 0.5  # a quarter of the term
    assert c.changes == 0  # standby from the start: no change
    c.activated(Lease("ctl-a", 4, clock.wall + 10, 10.0), clock.mono)
    c.stood_down()
    assert c.role == Role.STANDBY and not c.holds() and c.changes == 2
    view = c.seen().view()
    assert view["role"] == "standby" and view["role_since"].endswith("+00:00")
    assert view["lease"]["me"] == "ctl-a" and view["lease"]["token"] == 4


def test_each_lease_state_plays_one_role_and_a_fault_is_news_once() -> None:
    assert {state: role_of(state) for state in LeaseState} == {
        LeaseState.WAITING: Role.STANDBY,
        LeaseState.UNREACHABLE: Role.STANDBY,
        LeaseState.HELD: Role.ACTIVE,
        LeaseState.UNRENEWED: Role.ACTIVE,
        LeaseState.LOST: Role.STANDBY,
    }
    clock = Clock()
    c = lead(clock)
    assert c.state is LeaseState.WAITING and not c.lost()
    assert c.unreachable() and not c.unreachable()  # logged once while it lasts
    c.waiting(LeaseHeld("leased", holder="ctl-b", token=3, expires_in_s=5.0))
    assert c.unreachable()  # news again after the lease was read
    c.activated(Lease("ctl-a", 4, clock.wall + 10, 10.0), clock.mono)
    assert (c.state, c.role, c.changes) == (LeaseState.HELD, Role.ACTIVE, 1)
    assert c.unrenewed() and not c.unrenewed()
    assert (c.state, c.role, c.changes) == (LeaseState.UNRENEWED, Role.ACTIVE, 1)
    c.renewed(clock.mono, None)
    assert c.state is LeaseState.HELD and c.unrenewed()  # news again after a renewal
    c.stood_down()
    assert c.lost() and (c.role, c.changes) == (Role.STANDBY, 2) and not c.holds()
    c.renewed(clock.mono, None)  # a renewal that was on its way as the lease was lost
    assert not c.unrenewed()
    assert c.lost() and c.role is Role.STANDBY and not c.holds()


def test_a_file_ledger_takes_no_lease_and_is_active_for_good() -> None:
    clock = Clock()
    c = lead(clock, me=None)
    c.activated(None, clock.mono)
    clock.step(10_000)
    assert c.holds() and c.seen().view()["lease"] is None
    assert c.renew_every_s(1.0) == 1.0 and lead(clock, lease_s=1.5).renew_every_s(1.0) == 0.5


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("broker-a:1884", ("broker-a", 1884)),
        ("broker-b", ("broker-b", 1883)),
        ("10.20.0.5:8883", ("10.20.0.5", 8883)),
        ("[::1]:1885", ("::1", 1885)),
        ("[fe80::1]", ("fe80::1", 1883)),
    ],
)
def test_a_broker_address(text: str, expected: tuple[str, int]) -> None:
    assert broker_address(text, 1883) == expected


@pytest.mark.parametrize("text", ["", ":1883", "a:0", "a:65536", "a:x", "a b:1", "u@a:1", "[::1]x"])
def test_a_broker_address_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"broker address|port must be"):
        broker_address(text, 1883)


def test_hosts_in_the_mqtt_section() -> None:
    section = MqttSection(hosts=["a:1884", "b"], port=1999)
    assert section.endpoints() == (("a", 1884), ("b", 1999))
    options = section.broker_options("t1")
    assert (options.host, options.port, options.fallbacks) == ("a", 1884, (("b", 1999),))
    assert section.broker_options("t1", broker=("b", 1999)).fallbacks == ()
    assert MqttSection().endpoints() == (("127.0.0.1", 1883),)  # host/port as before
    for bad in ({"host": "a", "hosts": ["b"]}, {"hosts": ["a", "a:1883"]}, {"hosts": []}):
        with pytest.raises(ValidationError):
            MqttSection.model_validate(bad)


def sign_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sign_cmd.register(parser.add_subparsers())
    return parser.parse_args(["sign", "--link", "link-a", *argv])


def test_sign_broker_list() -> None:
    login = sign_cmd.login_from(sign_args("--broker", "a:1", "--broker", "b"))
    assert (login.host, login.port, login.fallbacks) == ("a", 1, (("b", 1883),))
    assert login.options().brokers == (("a", 1), ("b", 1883))
    assert login.url == "mqtt://a:1,b:1883"
    with pytest.raises(LoginError, match="--broker"):
        sign_cmd.login_from(sign_args("--broker", "a:port"))
