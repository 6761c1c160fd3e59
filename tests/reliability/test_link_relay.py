"""The link book over a faulty relay, at volume: tests/test_link_book.py's property (every
contribution counted exactly once, the money identity after every step, whatever the relay
loses, repeats or reorders) over many more random relays than the default suite runs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.rig import count
from tests.test_link_book import relay_case

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(7200)]

RELAYS = count("RELAYS", 2000, 250)


@settings(max_examples=RELAYS, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_faulty_relays_count_every_contribution_exactly_once(data: st.DataObject) -> None:
    relay_case(data)
