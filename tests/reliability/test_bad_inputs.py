"""Bad input from the board: fuzzed frames on the serial line and random keypad sequences.

Fuzz: ``RELIABILITY_FUZZ_FRAMES`` frames (100,000 by default) written to the pty between
the board's own frames — valid frames with bits flipped, truncated or overlong frames,
valid CRCs around garbage payloads (unknown types, bad lengths, bad strings), bare noise and
stray delimiters. Random keys: ``RELIABILITY_KEYS`` presses of any key in any order with
bets and the supervisor key toggled at random. Afterwards the daemon is still running, a
complete round plays, every published event is in the ledger and the ledger verifies.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from progressived_drivers import protocol as p

from tests.reliability.rig import (
    FUZZ_FRAMES,
    KEYS,
    SEED,
    TALLY,
    check_nothing_acknowledged_lost,
    ctl_verify,
    random_play,
    rig,
    scripted_round,
)

pytestmark = pytest.mark.reliability

BOARD_TYPES = sorted(int(t) for t in p.BOARD_TYPES)


def fuzzed_frames(rng: random.Random, n: int) -> Iterator[bytes]:
    """``n`` hostile frames; none of them is a well-formed board message that would act
    (those are the random-keys test's business), though some may decode."""
    for _ in range(n):
        roll = rng.random()
        seq = rng.randrange(p.SEQ_MOD)
        if roll < 0.30:  # a real frame with bits flipped (the CRC catches it)
            body = bytearray(
                p.encode_body(p.MsgType.KEY, seq, struct.pack(">I", rng.randint(1, 9)) + b"\x04LOCK")
            )
            for _ in range(rng.randint(1, 4)):
                body[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
            yield b"\x00" + p.cobs_encode(bytes(body)) + b"\x00"
        elif roll < 0.55:  # CRC-valid frames around garbage payloads
            kind = rng.choice([*BOARD_TYPES, rng.randrange(256)])
            payload = os.urandom(rng.randint(0, p.MAX_PAYLOAD))
            version = p.PROTOCOL_VERSION if rng.random() < 0.8 else rng.randrange(256)
            yield p.encode_frame(kind, seq, payload, version=version)
        elif roll < 0.70:  # truncated frames
            frame = p.encode_frame(rng.choice(BOARD_TYPES), seq, os.urandom(rng.randint(0, 16)))
            yield frame[: rng.randint(1, len(frame) - 1)]
        elif roll < 0.80:  # oversized: more than MAX_BODY between delimiters
            yield b"\x00" + bytes(rng.randint(1, 255) for _ in range(rng.randint(80, 300)))
        elif roll < 0.95:  # line noise
            yield os.urandom(rng.randint(1, 64))
        else:  # stray delimiters
            yield b"\x00" * rng.randint(1, 8)


@pytest.mark.timeout(3600)
async def test_fuzzed_frames(tmp_path: Path) -> None:
    rng = random.Random(SEED + 2)
    db = tmp_path / "ledger.db"
    async with rig(tmp_path) as t:
        t.start_daemon()
        await t.online()
        await scripted_round(t)
        sent = 0
        while sent < FUZZ_FRAMES:
            chunk = min(5000, FUZZ_FRAMES - sent)
            await t.sim.send_frames(fuzzed_frames(rng, chunk))
            sent += chunk
            TALLY["fuzzed_frames"] += chunk
            assert t.proc is not None and t.proc.poll() is None, t.log()[-3000:]
        await asyncio.sleep(1.0)
        # The board may have been declared offline (a frame that looks like another board's
        # hello); it must come back and the table must work.
        if t.sim.plugged:
            t.sim.reboot()
        await asyncio.sleep(1.0)
        await scripted_round(t)
        TALLY["published_events_checked"] += check_nothing_acknowledged_lost(t, db)
        assert t.kill(signal.SIGTERM) == 0
    ctl_verify(db)


@pytest.mark.timeout(3600)
async def test_random_keypad_sequences(tmp_path: Path) -> None:
    rng = random.Random(SEED + 3)
    db = tmp_path / "ledger.db"
    async with rig(tmp_path) as t:
        t.start_daemon()
        await t.online()
        done = 0
        while done < KEYS:
            before = TALLY["key_presses"]
            await random_play(t, rng, 100, pause=0.01)
            done += TALLY["key_presses"] - before
            assert t.proc is not None and t.proc.poll() is None, t.log()[-3000:]
            if rng.random() < 0.2:
                await scripted_round(t)
        await asyncio.sleep(1.0)
        await scripted_round(t)
        TALLY["published_events_checked"] += check_nothing_acknowledged_lost(t, db)
        assert t.kill(signal.SIGTERM) == 0
    ctl_verify(db)
