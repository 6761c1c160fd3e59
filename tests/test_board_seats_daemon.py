"""The daemon with a board that has fewer seats than its table, ``[board] seats`` unset (the
board maker's configuration): the board is refused, the table stays closed, and the
refusal is logged once, not every heartbeat (docs/protocol.md, HELLO)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from progressived.testing.board import simulator_factory
from progressived.testing.rig import table
from tests.daemon_harness import harness_config
from tests.mqtt_schemas import problems

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)


async def test_a_five_seat_board_on_a_seven_seat_table_is_refused(tmp_path: Path) -> None:
    config = harness_config()
    assert "seats" not in config.board
    async with table(
        tmp_path,
        config,
        board=simulator_factory(seats=5, heartbeat_interval_s=0.2),
        sign="seats-sign",
        check=problems,
    ) as t:
        t.start_daemon()
        await t.sub.wait(lambda: bool(t.sub.meters()), "a meter message")
        await asyncio.sleep(3.0)  # 15 of the board's heartbeats, 15 of our C_HELLOs
        assert t.sub.events("board_online") == []
        assert t.sub.meters()[-1]["state"] == "closed"
        text = t.log_text()
        assert text.count("board.too_few_seats") == 1, text[-3000:]
        assert '"board_seats": 5' in text and '"seats": 7' in text
        assert t.sim.counters["lights_received"] == 0
        assert t.proc is not None and t.proc.poll() is None
