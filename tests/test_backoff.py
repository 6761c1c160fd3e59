"""The reconnect backoff: the documented bounds, and clients that do not come back in lockstep.

docs/mqtt.md, "Reconnecting": the n-th consecutive wait lies between half and all of
``min(reconnect_max_s, reconnect_initial_s * 2**n)``; each client draws its own waits.
"""

from __future__ import annotations

import random
import statistics

import pytest

from progressived.mqtt.client import BrokerOptions
from progressived.mqtt.config import MqttSection
from progressived.mqtt.session import MqttSession
from progressived.runtime.backoff import Backoff


def test_each_wait_is_within_the_documented_bounds() -> None:
    backoff = Backoff(0.5, 30.0, rng=random.Random(7))
    for n in range(40):
        step = min(30.0, 0.5 * 2**n)
        wait = backoff.next()
        assert step / 2 <= wait <= step, (n, wait)
    assert backoff.step() == 30.0  # capped, never more


def test_a_reset_starts_from_the_first_step_again() -> None:
    backoff = Backoff(0.5, 30.0)
    for _ in range(10):
        backoff.next()
    backoff.reset()
    assert 0.25 <= backoff.next() <= 0.5


def test_the_defaults_documented_for_the_mqtt_section() -> None:
    """0.25-0.5 s, 0.5-1 s, 1-2 s, ... then 15-30 s (docs/mqtt.md)."""
    options = MqttSection().broker_options("t")
    backoff = MqttSession(options).backoff
    assert (backoff.initial_s, backoff.max_s) == (0.5, 30.0)
    steps = []
    for _ in range(8):
        steps.append(backoff.step())
        backoff.next()
    assert steps == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


@pytest.mark.parametrize("failures", [0, 3, 8])
def test_fifty_clients_that_lost_the_broker_together_do_not_retry_together(failures: int) -> None:
    """Fifty sessions made as the daemon makes them (each its own generator): after the
    same number of failures their next waits spread over the window instead of coinciding."""
    sessions = [MqttSession(BrokerOptions(reconnect_initial_s=0.5)) for _ in range(50)]
    for session in sessions:
        for _ in range(failures):
            session.backoff.next()
    step = sessions[0].backoff.step()
    waits = [session.backoff.next() for session in sessions]
    assert len(set(waits)) == 50  # no two alike
    assert max(waits) - min(waits) >= 0.3 * step  # spread over most of [step/2, step]
    assert statistics.pstdev(waits) >= 0.08 * step  # uniform over a half step: about 0.14


def test_nonsense_delays_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        Backoff(0, 1)
