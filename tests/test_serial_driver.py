"""The serial driver against the board simulator on REAL pty pairs (os.openpty), no mocks.

Every test goes through pyserial + pyserial-asyncio-fast on a pseudo-terminal, exactly as
the daemon does with a USB serial adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import tty
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from progressived_drivers import protocol as p
from progressived_drivers.base import (
    BoardDriver,
    BoardEvent,
    BoardOffline,
    BoardOnline,
    KeyPressed,
    SensorsReported,
    SupervisorKey,
)
from progressived_drivers.board_sim import BoardSimulator
from progressived_drivers.serial_board import (
    BoardSettings,
    SerialBoardDriver,
    board_settings_from_config,
)

from progressived.board.lights import Light
from progressived.config.table import ConfigError
from progressived.testing.waits import until

HB = 0.05
BAD = ("crc_errors", "malformed", "oversized", "bad_version")


@dataclass
class Rig:
    sim: BoardSimulator
    drv: SerialBoardDriver
    task: asyncio.Task[None]
    seen: list[BoardEvent] = field(default_factory=list)

    handle_keys: bool = True  # like the daemon: report each press handled once consumed

    async def event(self, timeout: float = 5.0) -> BoardEvent:
        ev = await asyncio.wait_for(self.drv.next_event(), timeout)
        self.seen.append(ev)
        if self.handle_keys and isinstance(ev, KeyPressed):
            self.drv.key_handled(ev)
        return ev

    async def expect(self, kind: type, timeout: float = 5.0) -> BoardEvent:
        ev = await self.event(timeout)
        assert isinstance(ev, kind), f"expected {kind.__name__}, got {ev!r}"
        return ev

    def drain(self) -> list[BoardEvent]:
        out = []
        while (ev := self.drv.next_event_nowait()) is not None:
            out.append(ev)
            if self.handle_keys and isinstance(ev, KeyPressed):
                self.drv.key_handled(ev)
        self.seen += out
        return out

    async def online(self) -> None:
        await self.expect(BoardOnline)
        sensors = await self.expect(SensorsReported)
        assert isinstance(sensors, SensorsReported)
        assert sensors.present == frozenset(self.sim.present)


def bad(drv: SerialBoardDriver) -> int:
    return sum(drv.counters[k] for k in BAD)


@contextlib.asynccontextmanager
async def make_rig(tmp_path: Path, missed: int = 6, start_sim: bool = True) -> AsyncIterator[Rig]:
    link = tmp_path / "usb-progressive-board-if00"
    sim = BoardSimulator(link=link, heartbeat_interval_s=HB, seats=7)
    if start_sim:
        await sim.start()
    drv = SerialBoardDriver(
        BoardSettings(
            port=str(link),
            heartbeat_interval_s=HB,
            missed_heartbeats=missed,
            reconnect_initial_s=0.02,
            reconnect_max_s=0.1,
            seats=7,
        )
    )
    task = asyncio.create_task(drv.run())
    try:
        yield Rig(sim, drv, task)
    finally:
        await drv.stop()
        await asyncio.wait_for(task, 5)
        await sim.stop()


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with make_rig(tmp_path) as r:
        await r.online()
        yield r


async def test_driver_implements_the_interface(rig: Rig) -> None:
    assert isinstance(rig.drv, BoardDriver)
    for name in ("good_frames", "crc_errors", "resyncs", "duplicates", "reconnects"):
        assert name in rig.drv.counters
    assert rig.drv.online


async def test_sensors_keys_supervisor_and_lights(rig: Rig) -> None:
    rig.sim.place_bet(3)
    state_seq = rig.sim.tx_seq  # the STATE just sent (the board may send more meanwhile)
    assert (await rig.expect(SensorsReported)) == SensorsReported(frozenset({3}), state_seq)
    rig.sim.supervisor(True)
    assert (await rig.expect(SupervisorKey)) == SupervisorKey(on=True)
    rig.sim.press("LOCK")
    key = await rig.expect(KeyPressed)
    assert isinstance(key, KeyPressed)
    assert (key.code, key.key_seq, key.board_id) == ("LOCK", 1, "SIM-1")
    assert key.idempotency_key == f"SIM-1:{rig.sim.boot_id:08x}:1"
    await rig.drv.set_lights({3: Light.LOCKED, 5: Light.WINNER})
    await until(lambda: rig.drv.lights_acked)
    assert rig.sim.lights[3] is Light.LOCKED
    assert rig.sim.lights[5] is Light.WINNER
    assert rig.sim.lights[1] is Light.IDLE
    # the key was acknowledged: the board stops retransmitting it
    await until(lambda: not rig.sim.pending)
    # periodic full-state reports and heartbeats make no events
    await asyncio.sleep(12 * HB)
    assert rig.drain() == []
    assert rig.drv.counters["heartbeats"] >= 5
    assert rig.drv.counters["states"] >= 4
    assert bad(rig.drv) == 0
    assert rig.drv.counters["duplicate_keys"] == 0


async def test_garbage_bit_flips_truncated_and_oversized_are_counted(rig: Rig) -> None:
    sim, drv = rig.sim, rig.drv
    before = dict(drv.counters)
    # garbage between delimiters
    sim.send_raw(b"\x00" + b"\x55" * 20 + b"\x00")
    # a phantom wager at seat 5 with one bit flipped in its CRC
    sim.tx_seq += 1
    body = bytearray(
        p.encode_body(p.MsgType.STATE, sim.tx_seq, p.State(7, frozenset({5}), False).encode())
    )
    body[-1] ^= 0x10
    sim.send_raw(b"\x00" + p.cobs_encode(bytes(body)) + b"\x00")
    # a phantom key press cut short
    whole = sim.frame(p.Key(sim.key_seq + 1, "LOCK"))
    sim.send_raw(whole[: len(whole) - 4])
    # an oversized frame
    sim.send_raw(b"\x00" + b"\x01" * 500 + b"\x00")
    # a frame of an unknown protocol version with a good CRC
    sim.tx_seq += 1
    sim.send_raw(p.encode_frame(p.MsgType.STATE, sim.tx_seq, bytes([7, 0, 0, 0, 0x10, 0]), 9))
    # a good CRC naming seat 8 on a 7-seat board
    sim.tx_seq += 1
    sim.send_raw(p.encode_frame(p.MsgType.STATE, sim.tx_seq, bytes([7, 0, 0, 0, 0x80, 0])))
    await until(lambda: drv.counters["bad_payload"] == before["bad_payload"] + 1)
    after = drv.counters
    assert (
        after["crc_errors"] + after["malformed"] == before["crc_errors"] + before["malformed"] + 3
    )
    assert after["oversized"] == before["oversized"] + 1
    assert after["bad_version"] == before["bad_version"] + 1
    assert after["resyncs"] == before["resyncs"] + 5
    # the line still works and nothing phantom happened
    sim.place_bet(2)
    assert (await rig.expect(SensorsReported)).present == frozenset({2})
    assert rig.drain() == []
    assert drv.online
    assert drv.counters["keys"] == 0


async def test_random_noise_never_makes_events(rig: Rig) -> None:
    for _ in range(20):
        rig.sim.inject_noise(300)
        await asyncio.sleep(0.005)
    await asyncio.sleep(5 * HB)
    events = rig.drain()
    assert not [e for e in events if isinstance(e, (KeyPressed, SupervisorKey))]
    assert all(e.present == frozenset() for e in events if isinstance(e, SensorsReported))
    assert rig.drv.counters["keys"] == 0
    assert rig.drv.counters["resyncs"] > 0
    assert rig.drv.online


async def test_duplicated_and_reordered_frames(rig: Rig) -> None:
    sim, drv = rig.sim, rig.drv
    # the same frame twice: one report
    sim.present = {1}
    frame = sim.frame(p.State(7, frozenset({1}), False))
    sim.send_raw(frame)
    sim.send_raw(frame)
    assert (await rig.expect(SensorsReported)).present == frozenset({1})
    await until(lambda: drv.counters["duplicates"] == 1)
    # newer state overtaken by an older one: the older is dropped
    older = sim.frame(p.State(7, frozenset({1, 4}), False))
    newer = sim.frame(p.State(7, frozenset({1, 4, 6}), False))
    sim.present = {1, 4, 6}
    sim.send_raw(newer)
    sim.send_raw(older)
    assert (await rig.expect(SensorsReported)).present == frozenset({1, 4, 6})
    await until(lambda: drv.counters["reordered"] == 1)
    # a key press retransmitted (new frame) and replayed (same frame): applied once
    seq = sim.press("LOCK")
    key = await rig.expect(KeyPressed)
    replay = sim.send(p.Key(seq, "LOCK"))
    sim.send_raw(replay)
    await until(lambda: drv.counters["duplicate_keys"] >= 1 and drv.counters["duplicates"] == 2)
    # two key presses arriving in the wrong order: delivered in order, each once
    sim.key_seq += 2
    first, second = sim.key_seq - 1, sim.key_seq
    sim.pending += [(first, "S3"), (second, "H1")]
    f1 = sim.frame(p.Key(first, "S3"))
    f2 = sim.frame(p.Key(second, "H1"))
    sim.send_raw(f2)
    sim.send_raw(f1)
    k1 = await rig.expect(KeyPressed)
    k2 = await rig.expect(KeyPressed)
    assert [(k.code, k.key_seq) for k in (key, k1, k2)] == [
        ("LOCK", seq),
        ("S3", first),
        ("H1", second),
    ]
    await until(lambda: not sim.pending)
    await asyncio.sleep(4 * HB)
    assert rig.drain() == []
    assert drv.counters["keys_out_of_order"] >= 1
    assert drv.counters["keys"] == 3


async def test_board_reboot_restarts_sequences(rig: Rig) -> None:
    sim, drv = rig.sim, rig.drv
    sim.place_bet(2)
    await rig.expect(SensorsReported)
    sim.press("LOCK")
    before = await rig.expect(KeyPressed)
    await until(lambda: not sim.pending)
    old_boot = sim.boot_id
    sim.reboot()
    offline = await rig.expect(BoardOffline)
    assert offline.reason == "board rebooted"
    await rig.expect(BoardOnline)
    assert (await rig.expect(SensorsReported)).present == frozenset({2})
    sim.press("RECON")
    after = await rig.expect(KeyPressed)
    assert isinstance(before, KeyPressed)
    assert isinstance(after, KeyPressed)
    assert before.key_seq == after.key_seq == 1  # the sequence restarted ...
    assert after.code == "RECON"  # ... and the new press is not taken for a duplicate
    assert before.idempotency_key != after.idempotency_key
    assert sim.boot_id != old_boot
    assert drv.counters["reboots"] == 1
    # after a reboot the board shows closed until the controller sends lights again
    await drv.set_lights({2: Light.BET})
    await until(lambda: sim.lights[2] is Light.BET)


async def test_unplug_and_replug_mid_round_loses_nothing(rig: Rig) -> None:
    sim, drv = rig.sim, rig.drv
    sim.place_bet(1)
    await rig.expect(SensorsReported)
    sim.place_bet(3)
    await rig.expect(SensorsReported)
    await drv.set_lights({1: Light.BET, 3: Light.BET})
    sim.press("LOCK")
    await rig.expect(KeyPressed)
    await until(lambda: not sim.pending and drv.lights_acked)
    sim.unplug()
    offline = await rig.expect(BoardOffline)
    assert offline.reason.startswith("port lost")
    assert not drv.online
    # while the cable is out: the dealer takes the locked wagers off and keys a seat;
    # the controller locks the lights
    sim.remove_bet(1)
    sim.remove_bet(3)
    sim.press("S3")
    await drv.set_lights({1: Light.LOCKED, 3: Light.LOCKED})
    await until(lambda: drv.counters["connect_failures"] >= 2)
    sim.replug()
    await rig.expect(BoardOnline)
    assert (await rig.expect(SensorsReported)).present == frozenset()
    key = await rig.expect(KeyPressed)
    assert (key.code, key.key_seq) == ("S3", 2)
    await until(lambda: drv.lights_acked and not sim.pending)
    assert sim.lights[1] is Light.LOCKED
    assert sim.lights[3] is Light.LOCKED
    sim.press("H1")
    key = await rig.expect(KeyPressed)
    assert (key.code, key.key_seq) == ("H1", 3)
    await asyncio.sleep(4 * HB)
    assert rig.drain() == []
    assert drv.counters["reconnects"] == 1
    assert drv.counters["keys"] == 3


async def test_frozen_board_goes_offline_after_missed_heartbeats(tmp_path: Path) -> None:
    async with make_rig(tmp_path, missed=3) as rig:
        await rig.online()
        loop = asyncio.get_running_loop()
        start = loop.time()
        rig.sim.freeze()
        offline = await rig.expect(BoardOffline, timeout=3)
        elapsed = loop.time() - start
        assert "missed 3 heartbeats" in offline.reason
        assert elapsed >= 3 * HB  # not before 3 missed (a late one is the timeout's: 3 s)
        await asyncio.sleep(6 * HB)
        assert rig.drain() == []  # no flapping while frozen
        rig.sim.thaw()
        await rig.online()
        assert rig.drv.counters["missed_heartbeat_offline"] == 1


async def test_port_missing_at_start_then_board_appears(tmp_path: Path) -> None:
    async with make_rig(tmp_path, start_sim=False) as rig:
        await until(lambda: rig.drv.counters["connect_failures"] >= 3)
        assert not rig.drv.online
        assert rig.drain() == []
        await rig.sim.start()
        await rig.online()
        assert rig.drv.counters["connects"] == 1


async def test_board_error_report(rig: Rig) -> None:
    rig.sim.report_error(4, "sensor 5 stuck")
    await until(lambda: rig.drv.counters["board_errors"] == 1)
    assert rig.drv.last_board_error == (4, "sensor 5 stuck")
    assert rig.drain() == []


async def test_controller_side_on_a_bare_pty() -> None:
    """Heartbeats both ways and the controller's frames, read off a bare os.openpty pair."""
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(master, False)
    loop = asyncio.get_running_loop()
    decoder = p.FrameDecoder()
    got: list[tuple[p.Frame, p.Message]] = []

    def readable() -> None:
        with contextlib.suppress(BlockingIOError):
            for frame in decoder.feed(os.read(master, 4096)):
                got.append((frame, p.decode_message(frame)))

    loop.add_reader(master, readable)
    drv = SerialBoardDriver(BoardSettings(port=os.ttyname(slave), heartbeat_interval_s=HB))
    task = asyncio.create_task(drv.run())
    try:
        await until(lambda: any(isinstance(m, p.ControllerHello) for _, m in got))
        hello = next(m for _, m in got if isinstance(m, p.ControllerHello))
        assert hello == p.ControllerHello(heartbeat_ms=50)
        assert drv.counters["keys"] == 0
        assert not drv.online
        os.write(master, p.encode_message(p.Hello("BARE", 7, 4, 0), 100))
        os.write(master, p.encode_message(p.State(4, frozenset({4}), False), 101))
        assert isinstance(await asyncio.wait_for(drv.next_event(), 3), BoardOnline)
        assert (await asyncio.wait_for(drv.next_event(), 3)) == SensorsReported(frozenset({4}), 101)
        mark = len(got)
        for seq in range(102, 112):  # the board's heartbeats keep it online
            os.write(master, p.encode_message(p.Heartbeat(), seq))
            await asyncio.sleep(HB)
        assert drv.online
        beats = [m for _, m in got[mark:] if isinstance(m, p.ControllerHeartbeat)]
        assert len(beats) >= 5
        # a new boot is answered with a C_HELLO that restarts the controller's numbering at 1;
        # from there every frame is numbered one more than the one before
        restart = next(i for i, (f, m) in enumerate(got) if isinstance(m, p.ControllerHello) and f.seq == 1 and i > 0)
        assert all(isinstance(m, p.ControllerHello) for _, m in got[:restart])
        seqs = [f.seq for f, _ in got]
        assert all(p.seq_diff(b, a) == 1 for a, b in itertools.pairwise(seqs[:restart]))
        assert all(p.seq_diff(b, a) == 1 for a, b in itertools.pairwise(seqs[restart:]))
        assert decoder.counters["crc_errors"] == 0
    finally:
        await drv.stop()
        await asyncio.wait_for(task, 5)
        loop.remove_reader(master)
        os.close(master)
        os.close(slave)


def _flood(count: int, seed: int) -> list[bytes]:
    """``count`` bad frames, each delimited: every one must be rejected and counted once."""
    rng = random.Random(seed)
    phantom_state = p.encode_body(
        p.MsgType.STATE, 1, p.State(7, frozenset({1, 5, 7}), True).encode()
    )
    phantom_key = p.encode_body(p.MsgType.KEY, 1, p.Key(1, "LOCK").encode())
    out = []
    for _ in range(count):
        kind = rng.randrange(5)
        if kind == 0:  # random bytes
            chunk = p.cobs_encode(rng.randbytes(rng.randrange(0, 80)))
        elif kind == 1:  # a phantom frame with one bit flipped
            body = bytearray(rng.choice((phantom_state, phantom_key)))
            body[2:4] = rng.randrange(65536).to_bytes(2, "big")
            body[-4:] = p.CRC.pack(zlib.crc32(bytes(body[:-4])))
            bit = rng.randrange(len(body) * 8)
            body[bit // 8] ^= 1 << (bit % 8)
            chunk = p.cobs_encode(bytes(body))
        elif kind == 2:  # a phantom frame cut short
            body = rng.choice((phantom_state, phantom_key))
            chunk = p.cobs_encode(body[: rng.randrange(0, len(body))])
        elif kind == 3:  # oversized
            chunk = rng.randbytes(rng.randrange(p.MAX_ENCODED + 1, 400)).replace(b"\x00", b"\x07")
        else:  # another protocol version
            chunk = p.cobs_encode(
                p.encode_body(p.MsgType.STATE, rng.randrange(65536), b"\x07\x00\x00\x00\x01\x00", 2)
            )
        out.append(b"\x00" + chunk + b"\x00")
    return out


async def test_flood_of_100000_random_frames(rig: Rig) -> None:
    sim, drv = rig.sim, rig.drv
    frames = _flood(100_000, seed=20261121)
    before = dict(drv.counters)
    await sim.send_frames(frames)
    await until(lambda: bad(drv) - sum(before[k] for k in BAD) >= 100_000, timeout=60)
    await asyncio.sleep(4 * HB)
    assert bad(drv) - sum(before[k] for k in BAD) == 100_000
    assert drv.counters["resyncs"] - before["resyncs"] == 100_000
    assert drv.counters["internal_errors"] == 0
    events = rig.drain()
    # no phantom wager, no phantom key press (a slow flood may cost an offline/online)
    assert not [e for e in events if isinstance(e, (KeyPressed, SupervisorKey))]
    assert all(e.present == frozenset() for e in events if isinstance(e, SensorsReported))
    assert drv.counters["keys"] == 0
    sim.place_bet(6)
    await until(
        lambda: any(isinstance(e, SensorsReported) and e.present == {6} for e in rig.drain())
    )


async def test_second_driver_cannot_share_the_port(rig: Rig) -> None:
    other = SerialBoardDriver(
        BoardSettings(port=rig.drv.settings.port, heartbeat_interval_s=HB, reconnect_initial_s=0.02)
    )
    task = asyncio.create_task(other.run())
    try:
        await until(lambda: other.counters["connect_failures"] >= 2)
        assert other.counters["connects"] == 0
        assert not other.online
    finally:
        await other.stop()
        await asyncio.wait_for(task, 5)
    assert rig.drv.online


def test_board_settings_from_config() -> None:
    settings = board_settings_from_config(
        {"board": {"port": "/dev/serial/by-id/usb-x-if00-port0", "missed_heartbeats": 5}}
    )
    assert settings.missed_heartbeats == 5
    assert settings.heartbeat_interval_s == 1.0
    with pytest.raises(
        ConfigError, match=r"table\.toml: board\.missed_heartbeats: Input should be greater"
    ):
        board_settings_from_config({"board": {"port": "x", "missed_heartbeats": 0}}, "table.toml")
    with pytest.raises(ConfigError, match=r"table\.toml: board: missing required key"):
        board_settings_from_config({}, "table.toml")


async def test_a_press_is_acknowledged_only_once_the_daemon_has_handled_it(tmp_path: Path) -> None:
    """A daemon that dies between receiving a press and journaling it gets it again."""
    async with make_rig(tmp_path) as rig:
        rig.handle_keys = False
        await rig.online()
        seq = rig.sim.press("LOCK")
        key = await rig.expect(KeyPressed)
        assert isinstance(key, KeyPressed)
        assert key.key_seq == seq
        await asyncio.sleep(1.0)
        assert rig.sim.pending, "not acknowledged before the daemon handled it"
        assert not [e for e in rig.drain() if isinstance(e, KeyPressed)], "delivered once"
        # The daemon "dies": a new driver on the same port receives the same press again.
        await rig.drv.stop()
        await asyncio.wait_for(rig.task, 5)
        again = SerialBoardDriver(rig.drv.settings)
        task = asyncio.create_task(again.run())
        try:
            async with asyncio.timeout(20):  # the key again, whatever else comes first
                while not isinstance(event := await again.next_event(), KeyPressed):
                    pass
            assert event.idempotency_key == key.idempotency_key
            again.key_handled(event)
            await until(lambda: not rig.sim.pending)
        finally:
            await again.stop()
            await task
