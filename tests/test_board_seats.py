"""The table's seats against the board's, stray wagers, and leaving the board's fail-safe
after a controller stall (docs/protocol.md: HELLO, STATE, LIGHTS, "Heartbeats and
offline"): the driver against the simulator on real ptys, ``[board] seats`` unset as in
the board maker's configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from progressived_drivers import protocol as p
from progressived_drivers.base import BoardOffline, BoardOnline, SensorsReported
from progressived_drivers.board_sim import BoardSimulator
from progressived_drivers.serial_board import BoardSettings, SerialBoardDriver
from structlog.testing import capture_logs

from progressived.board.lights import Light
from progressived.testing.waits import until
from tests.test_serial_driver import HB, Rig, make_rig

# the daemon lights every seat of a 7-seat table
TABLE = dict.fromkeys(range(1, 8), Light.IDLE)


@contextlib.asynccontextmanager
async def _rig(tmp_path: Path, board_seats: int, *, told_first: bool) -> AsyncIterator[Rig]:
    """A ``board_seats`` board; the driver knows the 7-seat table before (or after) it runs."""
    link = tmp_path / "board"
    sim = BoardSimulator(link=link, heartbeat_interval_s=HB, seats=board_seats)
    lights_seen: list[p.Lights] = []
    on_frame = sim._on_frame

    def record(frame: p.Frame) -> None:
        with contextlib.suppress(p.ProtocolError):
            msg = p.decode_message(frame)
            if isinstance(msg, p.Lights):
                lights_seen.append(msg)
        on_frame(frame)

    sim._on_frame = record
    sim.lights_seen = lights_seen
    await sim.start()
    drv = SerialBoardDriver(BoardSettings(port=str(link), heartbeat_interval_s=HB))
    if told_first:
        await drv.set_lights(TABLE)
    task = asyncio.create_task(drv.run())
    try:
        yield Rig(sim, drv, task)
    finally:
        await drv.stop()
        await asyncio.wait_for(task, 5)
        await sim.stop()


def _lines(logs: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == event]


async def test_a_board_with_fewer_seats_than_the_table_is_refused(tmp_path: Path) -> None:
    with capture_logs() as logs:
        async with _rig(tmp_path, 5, told_first=True) as rig:
            await until(lambda: rig.drv.counters["too_few_seats"] >= 4)
            assert not rig.drv.online
            assert rig.drain() == []  # never online, so the table never opens
            assert rig.sim.lights_seen == []
    refused = _lines(logs, "board.too_few_seats")
    assert len(refused) == 1, refused  # rate-limited: once, not every heartbeat
    assert refused[0]["log_level"] == "error"
    assert (refused[0]["board_seats"], refused[0]["seats"]) == (5, 7)


async def test_a_board_found_too_small_once_the_table_is_known_goes_offline(
    tmp_path: Path,
) -> None:
    async with _rig(tmp_path, 5, told_first=False) as rig:
        await rig.online()  # the driver does not know the table yet: the board's 5 seats
        await rig.drv.set_lights(TABLE)
        offline = await rig.expect(BoardOffline)
        assert "5 seats, the table 7" in offline.reason
        await asyncio.sleep(6 * HB)  # its HELLOs (answers to our C_HELLOs) are refused
        assert not rig.drv.online
        assert rig.drain() == []
        seen = rig.sim.lights_seen
        assert all(len(lights.codes) <= 5 for lights in seen), seen


async def test_lights_carry_the_tables_seats_not_more(tmp_path: Path) -> None:
    async with _rig(tmp_path, 9, told_first=True) as rig:
        await rig.online()
        await rig.drv.set_lights({**TABLE, 3: Light.BET})
        await until(lambda: rig.drv.lights_acked)
        seen = rig.sim.lights_seen
        assert {len(lights.codes) for lights in seen} == {7}
        assert rig.sim.lights[3] is Light.BET and rig.sim.lights[8] is Light.IDLE


async def test_a_wager_beyond_the_table_is_warned_and_the_tables_seats_still_apply(
    tmp_path: Path,
) -> None:
    with capture_logs() as logs:
        async with _rig(tmp_path, 9, told_first=True) as rig:
            await rig.online()
            rig.sim.place_bet(8)  # a stray object on a seat the table does not use
            rig.sim.place_bet(2)
            ev = await rig.expect(SensorsReported)
            assert ev.present == frozenset({2})
            rig.sim.place_bet(3)
            ev = await rig.expect(SensorsReported)
            assert ev.present == frozenset({2, 3})
            await asyncio.sleep(12 * HB)  # periodic STATEs repeat the stray wager
            assert rig.drv.counters["wagers_beyond_table"] >= 3
            assert rig.drv.counters["bad_payload"] == 0
            assert rig.drv.online
    stray = _lines(logs, "board.wager_beyond_table")
    assert len(stray) == 1, stray  # rate-limited
    assert stray[0]["log_level"] == "warning"
    assert (stray[0]["seats"], stray[0]["table_seats"]) == ([8], 7)


async def test_lights_come_back_after_a_controller_stall(tmp_path: Path) -> None:
    """The controller stops writing (SIGSTOP-like) longer than the board's fail-safe time:
    the board shows every light closed; when the controller resumes it resends LIGHTS."""
    async with make_rig(tmp_path, missed=20) as rig:
        await rig.online()
        sim, drv = rig.sim, rig.drv
        await drv.set_lights({1: Light.BET, 2: Light.LOCKED})
        await until(lambda: drv.lights_acked and sim.lights[2] is Light.LOCKED)
        tick = drv._tick
        drv._tick = lambda: None
        await until(lambda: set(sim.lights.values()) == {Light.CLOSED})  # the fail-safe
        await asyncio.sleep(2 * HB)
        drv._tick = tick
        await until(lambda: sim.lights[2] is Light.LOCKED, timeout=10 * HB)
        assert sim.lights[1] is Light.BET
        assert drv.counters["stall_lights"] >= 1
        assert drv.online and BoardOnline not in [type(e) for e in rig.drain()]


async def test_a_board_replaced_by_a_smaller_one_goes_offline_at_its_hello(tmp_path: Path) -> None:
    async with _rig(tmp_path, 7, told_first=True) as rig:
        await rig.online()
        rig.sim.seats = 5  # a 5-seat board plugged in instead (a new boot)
        rig.sim.reboot()
        offline = await rig.expect(BoardOffline)
        assert "5 seats, the table 7" in offline.reason
        rig.sim.place_bet(1)  # its frames are not taken for the old board's
        await asyncio.sleep(6 * HB)
        assert rig.drain() == []
        assert not rig.drv.online
