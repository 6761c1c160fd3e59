"""Long fuzz of the board protocol decoder (run with ``pytest tests/reliability -m reliability``).

Ten million random bytes with valid frames interleaved: the decoder never raises, every
valid frame separated by delimiters comes through, and nothing else does.
"""

from __future__ import annotations

import random

import pytest
from progressived_drivers import protocol as p

pytestmark = pytest.mark.reliability


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ten_million_random_bytes_with_frames(seed: int) -> None:
    rng = random.Random(seed)
    decoder = p.FrameDecoder()
    sent: list[int] = []
    got: list[int] = []
    seq = 0
    for _ in range(2000):
        noise = rng.randbytes(rng.randrange(0, 10_000))
        seq = (seq + 1) % p.SEQ_MOD
        frame = p.encode_message(p.State(7, frozenset({rng.randrange(1, 8)}), False), seq)
        sent.append(seq)
        stream = noise + frame
        cut = rng.randrange(len(stream) + 1)
        for part in (stream[:cut], stream[cut:]):
            for f in decoder.feed(part):
                msg = p.decode_message(f)
                assert isinstance(msg, p.State)
                got.append(f.seq)
    # a frame survives unless random noise before it happened to end in a valid frame
    assert got == sent
