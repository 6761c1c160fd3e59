"""Board resynchronisation, hellos, wire-error logging: the driver against a board that
follows docs/protocol.md strictly (the simulator drops everything before the controller's
hello), on real ptys through pyserial-asyncio-fast.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from progressived_drivers import protocol as p
from progressived_drivers.base import BoardOffline, BoardOnline, KeyPressed, SensorsReported
from progressived_drivers.board_sim import BoardSimulator
from progressived_drivers.serial_board import BoardSettings, SerialBoardDriver
from progressived_drivers.wire_log import WireErrorLog, hex_sample
from structlog.testing import capture_logs

from progressived.board.lights import Light
from progressived.testing.waits import until
from tests.test_serial_driver import HB, Rig, make_rig


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with make_rig(tmp_path) as r:
        await r.online()
        yield r


def _wire_lines(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "board wire error"]


async def _drain_keys(rig: Rig) -> None:
    """Consume events as the daemon does (each press reported handled)."""
    while (ev := rig.drv.next_event_nowait()) is not None:
        rig.seen.append(ev)
        if isinstance(ev, KeyPressed):
            rig.drv.key_handled(ev)


async def test_a_strict_board_resynchronises_within_a_second_after_a_reboot(
    tmp_path: Path,
) -> None:
    """After a reboot the controller answers with its hello (numbering from 1)."""
    link = tmp_path / "board"
    sim = BoardSimulator(link=link, heartbeat_interval_s=1.0, seats=7)
    await sim.start()
    drv = SerialBoardDriver(BoardSettings(port=str(link), heartbeat_interval_s=1.0, seats=7))
    task = asyncio.create_task(drv.run())
    rig = Rig(sim, drv, task)
    try:
        await rig.online()
        await drv.set_lights({1: Light.BET, 2: Light.LOCKED})
        await until(lambda: drv.lights_acked and sim.lights[2] is Light.LOCKED)
        hellos_before = drv.counters["controller_hellos"]
        sim.reboot()
        assert sim.lights[2] is Light.CLOSED  # a booting board shows closed
        key_seq = sim.press("LOCK")

        def resynced() -> bool:
            return (
                sim.lights[1] is Light.BET
                and sim.lights[2] is Light.LOCKED
                and not sim.pending
                and sim.key_acked == key_seq
            )

        async def drained_and_resynced() -> bool:
            await _drain_keys(rig)
            return resynced()

        await until(drained_and_resynced, "resynchronised after the reboot (lights, the key)")
        assert drv.counters["controller_hellos"] > hellos_before
        assert drv.counters["reboots"] == 1
        assert sim.counters["controller_hellos"] >= 2  # one at start, one after the reboot
        assert sim._rx_seq is not None and sim._rx_seq < 10  # the controller restarted at 1
        kinds = [type(e) for e in rig.seen]
        assert BoardOffline in kinds and kinds.count(BoardOnline) == 2
        assert [e.code for e in rig.seen if isinstance(e, KeyPressed)] == ["LOCK"]
    finally:
        await drv.stop()
        await asyncio.wait_for(task, 5)
        await sim.stop()


async def test_a_hello_with_a_lower_sequence_resets_the_expectation(tmp_path: Path) -> None:
    """A same-boot HELLO with a lower seq is honoured, the table stays open."""
    async with make_rig(tmp_path, missed=4) as rig:
        await rig.online()
        sim, drv = rig.sim, rig.drv
        await asyncio.sleep(6 * HB)  # the board's numbering moves on (heartbeats)
        assert sim.tx_seq > 5
        sim.tx_seq = 0  # e.g. firmware that restarts its numbering with every hello
        sim.send(p.Hello(sim.board_id, sim.boot_id, sim.seats, sim.key_acked))
        sim.place_bet(4)
        ev = await rig.expect(SensorsReported)
        assert ev.present == frozenset({4})
        sim.press("LOCK")
        key = await rig.expect(KeyPressed)
        assert key.code == "LOCK"
        await asyncio.sleep(8 * HB)  # longer than missed_heartbeats: still online
        assert rig.drain() == []
        assert drv.online
        assert drv.counters["reordered"] == 0
        assert drv.counters["offline_events"] == 0


async def test_state_whose_seat_count_differs_from_hello_is_bad_payload(rig: Rig) -> None:
    sim, drv = rig.sim, rig.drv
    sim.send(p.State(8, frozenset({1}), False))  # the board said 7 in its HELLO
    await until(lambda: drv.counters["bad_payload"] == 1)
    sim.place_bet(1)
    ev = await rig.expect(SensorsReported)
    assert ev.present == frozenset({1})


async def test_wire_errors_are_logged_with_kind_and_sample(rig: Rig) -> None:
    sim, drv = rig.sim, rig.drv
    good = p.encode_body(p.MsgType.HEARTBEAT, 9, b"")
    crc_bad = bytearray(good)
    crc_bad[-1] ^= 0xFF
    with capture_logs() as logs:
        sim.send_raw(b"\x00" + p.cobs_encode(bytes(crc_bad)) + b"\x00")
        sim.send_raw(b"\x00" + p.cobs_encode(good[:5]) + b"\x00")  # truncated
        sim.send_raw(b"\x00" + b"\x07" * (p.MAX_ENCODED + 5) + b"\x00")  # oversized
        sim.send_raw(p.encode_frame(p.MsgType.HEARTBEAT, 10, b"", version=2))
        sim.send_raw(p.encode_frame(p.MsgType.C_LIGHTS, sim.tx_seq + 1, b"\x01\x00"))
        sim.send_raw(p.encode_frame(p.MsgType.KEY, sim.tx_seq + 2, b"\x00\x00\x00\x00\x01A"))
        sim.send_raw(sim.frame(p.Heartbeat(), seq=sim.tx_seq))  # a replay of the last one
        await until(lambda: len(_wire_lines(logs)) >= 7)
    lines = _wire_lines(logs)
    assert [e["kind"] for e in lines] == [
        "crc_error",
        "truncated",
        "oversized",
        "bad_version",
        "wrong_direction",
        "bad_payload",
        "duplicate",
    ]
    assert all(e["log_level"] == "warning" for e in lines)
    assert lines[0]["sample"] == p.cobs_encode(bytes(crc_bad)).hex()
    assert lines[2]["sample"].endswith("..")
    assert drv.counters["wire_errors_logged"] == 7


async def test_a_babbling_line_is_rate_limited_but_counted(rig: Rig) -> None:
    sim, drv = rig.sim, rig.drv
    body = bytearray(p.encode_body(p.MsgType.HEARTBEAT, 9, b""))
    body[-1] ^= 0xFF
    bad = b"\x00" + p.cobs_encode(bytes(body)) + b"\x00"
    before = drv.counters["crc_errors"]
    with capture_logs() as logs:
        await sim.send_frames([bad] * 500)
        await until(lambda: drv.counters["crc_errors"] - before == 500)
    lines = _wire_lines(logs)
    assert len(lines) == 10  # the burst, then only counted
    assert drv.counters["wire_errors_logged"] == 10
    assert drv.counters["wire_errors_suppressed"] == 490


def test_wire_log_window_reports_what_it_suppressed() -> None:
    now = [0.0]
    wire = WireErrorLog(burst=3, window_s=10.0, clock=lambda: now[0])
    with capture_logs() as logs:
        logged = [wire.report("crc_error", b"\x01\x02") for _ in range(8)]
        now[0] = 10.5
        assert wire.report("malformed", b"\x03")
    assert logged == [True, True, True, False, False, False, False, False]
    assert len(logs) == 4
    assert logs[-1]["suppressed_before"] == 5
    assert logs[-1]["kind"] == "malformed"
    assert wire.suppressed == 5
    assert hex_sample(bytes(range(30)), 4) == "00010203.."


async def test_board_log_lines_carry_the_daemons_current_round(rig: Rig) -> None:
    """The driver's task started before the round; its lines must still say it."""
    structlog.contextvars.bind_contextvars(table="tcp-07", round=42)
    try:
        with capture_logs() as logs:
            await rig.drv.set_lights({1: Light.BET})  # the daemon calls the driver
            rig.sim.send_raw(b"\x00\x55\x55\x00")
            await until(lambda: bool(_wire_lines(logs)))
        assert _wire_lines(logs)[0]["round"] == 42
        assert _wire_lines(logs)[0]["table"] == "tcp-07"
    finally:
        structlog.contextvars.unbind_contextvars("table", "round")


async def test_connect_failed_is_a_warning(tmp_path: Path) -> None:
    with capture_logs() as logs:
        async with make_rig(tmp_path, start_sim=False) as rig:
            await until(lambda: rig.drv.counters["connect_failures"] >= 3)
    failed = [e for e in logs if e["event"] == "board.connect_failed"]
    assert failed and all(e["log_level"] == "warning" for e in failed)
    assert len(failed) == 1  # one line per streak (then one a minute), not one per attempt


async def test_unacknowledged_lights_make_the_controller_say_hello_again(rig: Rig) -> None:
    """A board that hears the controller but has lost its numbering gets a new hello."""
    sim, drv = rig.sim, rig.drv
    await asyncio.sleep(4 * HB)  # the start-up hello exchange is over
    hellos = drv.counters["controller_hellos"]
    assert sim._rx_seq is not None
    sim._rx_seq = (sim._rx_seq + 30000) % p.SEQ_MOD  # the board's expectation is now wrong
    await drv.set_lights({3: Light.WINNER})
    await until(lambda: sim.lights[3] is Light.WINNER, timeout=3)
    # the ACK may still be on its way, or acknowledge an earlier copy of a resent LIGHTS
    await until(lambda: drv.lights_acked, timeout=3)
    assert drv.counters["resync_hellos"] >= 1
    assert drv.counters["controller_hellos"] > hellos
    assert sim.counters["stale_frames"] >= 1
