"""The soak of the fair share (docs/link.md): one member table floods the link for minutes while another
plays at a dealer's pace (tests/link_flood.py; the short version is
tests/test_link_fairness.py, in the default suite).

Counts: ``RELIABILITY_LINK_FLOOD_S`` (120; short 20) seconds of flood at
``RELIABILITY_LINK_FLOOD_RATE`` (3,000) messages a second, during which the good table
plays ``RELIABILITY_LINK_FLOOD_ROUNDS`` (40; short 8) contributions, one every second.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.rig import TALLY, count
from tests.test_link_fairness import check_the_share, flood_and_play

pytestmark = pytest.mark.reliability

FLOOD_S = count("LINK_FLOOD_S", 120, 20)
FLOOD_RATE = count("LINK_FLOOD_RATE", 3_000, 3_000)
ROUNDS = count("LINK_FLOOD_ROUNDS", 40, 8)


@pytest.mark.timeout(3600)
async def test_a_member_flooding_for_minutes_never_starves_the_other_table(
    tmp_path: Path,
) -> None:
    found = await flood_and_play(
        tmp_path,
        flood_s=FLOOD_S,
        rate=FLOOD_RATE,
        rounds=ROUNDS,
        valid=5_000,
        pace_s=1.0,
        stop_when_answered=False,  # the soak floods its whole FLOOD_S
    )
    check_the_share(found, ROUNDS)
    TALLY["link_flood_messages"] += found.sent
