"""The wire protocol codec: COBS, CRC, the resynchronising decoder and the messages (pure)."""

from __future__ import annotations

import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from progressived_drivers import protocol as p

from tests.budget import examples

BAD = ("crc_errors", "malformed", "oversized", "bad_version")


def state_frame(seq: int = 1, present: frozenset[int] = frozenset({2})) -> bytes:
    return p.encode_message(p.State(7, present, False), seq)


def bad_total(decoder: p.FrameDecoder) -> int:
    return sum(decoder.counters[k] for k in BAD)


@given(st.binary(max_size=600))
def test_cobs_round_trip_and_no_zero_bytes(data: bytes) -> None:
    encoded = p.cobs_encode(data)
    assert 0 not in encoded
    assert p.cobs_decode(encoded) == data


def test_cobs_known_vectors() -> None:
    assert p.cobs_encode(b"") == b"\x01"
    assert p.cobs_encode(b"\x00") == b"\x01\x01"
    assert p.cobs_encode(b"\x11\x22\x00\x33") == b"\x03\x11\x22\x02\x33"
    assert p.cobs_encode(bytes(range(1, 255))) == b"\xff" + bytes(range(1, 255)) + b"\x01"


def test_crc_is_crc32_iso_hdlc_over_header_and_payload() -> None:
    body = p.encode_body(p.MsgType.HEARTBEAT, 0x1234, b"")
    assert body[:4] == bytes([1, 0x02, 0x12, 0x34])
    assert int.from_bytes(body[4:], "big") == zlib.crc32(body[:4])
    assert zlib.crc32(b"123456789") == 0xCBF43926  # the CRC-32 check value


@pytest.mark.parametrize(
    "msg",
    [
        p.Hello("TBL-07 board", 0xDEADBEEF, 7, 41),
        p.Heartbeat(),
        p.State(7, frozenset({1, 3, 7}), True),
        p.State(32, frozenset({32}), False),
        p.Key(12, "H3"),
        p.Ack(65535),
        p.BoardErrorReport(3, "sensor 4 stuck"),
        p.ControllerHello(250),
        p.ControllerHeartbeat(),
        p.Lights((p.LightCode.IDLE, p.LightCode.BET, p.LightCode.WINNER, p.LightCode.CLOSED)),
        p.KeyAck(99),
    ],
)
def test_every_message_round_trips(msg: p.Message) -> None:
    decoder = p.FrameDecoder()
    frames = decoder.feed(p.encode_message(msg, 77))
    assert len(frames) == 1
    assert frames[0].seq == 77
    assert frames[0].version == p.PROTOCOL_VERSION
    assert p.decode_message(frames[0]) == msg


def test_frames_split_byte_by_byte_and_joined() -> None:
    stream = b"".join(state_frame(seq) for seq in range(1, 6))
    one_by_one = p.FrameDecoder()
    got = [f for i in range(len(stream)) for f in one_by_one.feed(stream[i : i + 1])]
    assert [f.seq for f in got] == [1, 2, 3, 4, 5]
    assert [f.seq for f in p.FrameDecoder().feed(stream)] == [1, 2, 3, 4, 5]
    assert bad_total(one_by_one) == 0


def test_garbage_before_a_frame_is_discarded_and_counted() -> None:
    decoder = p.FrameDecoder()
    frames = decoder.feed(b"\x13\x37garbage\xff\xfe" + state_frame(9))
    assert [f.seq for f in frames] == [9]
    assert decoder.counters["resyncs"] == 1
    assert bad_total(decoder) == 1
    assert decoder.counters["bytes_discarded"] == 11


def test_every_single_bit_flip_is_rejected_and_counted() -> None:
    frame = state_frame(5, frozenset({1, 2}))
    for index in range(1, len(frame) - 1):
        for bit in range(8):
            flipped = bytearray(frame)
            flipped[index] ^= 1 << bit
            decoder = p.FrameDecoder()
            # a good frame after it must still come through
            frames = decoder.feed(bytes(flipped) + state_frame(6))
            assert [f.seq for f in frames] == [6], (index, bit)
            assert bad_total(decoder) >= 1, (index, bit)
            assert decoder.counters["good_frames"] == 1


def test_truncated_frames_are_rejected() -> None:
    frame = state_frame(3)
    for cut in range(2, len(frame) - 1):
        decoder = p.FrameDecoder()
        frames = decoder.feed(frame[:cut] + state_frame(4))
        assert [f.seq for f in frames] == [4]
        assert bad_total(decoder) == 1


def test_oversized_frames_are_dropped_until_the_next_delimiter() -> None:
    decoder = p.FrameDecoder()
    big = bytes(random.Random(1).randrange(1, 256) for _ in range(5000))
    frames = decoder.feed(b"\x00" + big[:3000])
    frames += decoder.feed(big[3000:] + state_frame(8))
    assert [f.seq for f in frames] == [8]
    assert decoder.counters["oversized"] == 1
    assert decoder.counters["resyncs"] == 1
    # a body longer than allowed with a correct CRC is refused too
    body = p.HEADER.pack(1, p.MsgType.STATE, 1) + bytes(p.MAX_PAYLOAD + 1)
    body += p.CRC.pack(zlib.crc32(body))
    decoder = p.FrameDecoder()
    assert decoder.feed(b"\x00" + p.cobs_encode(body) + b"\x00") == []
    assert bad_total(decoder) == 1


def test_unknown_version_is_counted_not_decoded() -> None:
    decoder = p.FrameDecoder()
    assert decoder.feed(p.encode_frame(p.MsgType.HEARTBEAT, 1, b"", version=2)) == []
    assert decoder.counters["bad_version"] == 1


def test_payload_validation() -> None:
    def frame(t: int, payload: bytes) -> p.Frame:
        return p.Frame(1, t, 1, payload)

    bad = [
        frame(p.MsgType.STATE, bytes([7, 0, 0, 0, 0x80, 0])),  # seat 8 on a 7-seat board
        frame(p.MsgType.STATE, bytes([7, 0, 0, 0, 1, 2])),  # unknown flag
        frame(p.MsgType.STATE, bytes([0, 0, 0, 0, 0, 0])),  # no seats
        frame(p.MsgType.STATE, bytes([7, 0, 0, 0, 1])),  # short
        frame(p.MsgType.KEY, bytes([0, 0, 0, 0, 1, 65])),  # key_seq 0
        frame(p.MsgType.KEY, bytes([0, 0, 0, 1, 2, 65, 32])),  # space in code
        frame(p.MsgType.KEY, bytes([0, 0, 0, 1, 5, 65])),  # string longer than payload
        frame(p.MsgType.HEARTBEAT, b"x"),
        frame(p.MsgType.C_LIGHTS, bytes([2, 1, 9])),  # unknown light
        frame(p.MsgType.C_LIGHTS, bytes([3, 1, 1])),  # count mismatch
        frame(p.MsgType.HELLO, b"\x00" + bytes(9)),  # empty board id
        frame(0x7F, b""),  # unknown type
    ]
    for f in bad:
        with pytest.raises(p.ProtocolError):
            p.decode_message(f)


def test_seq_diff_wraps() -> None:
    assert p.seq_diff(1, 65535) == 2
    assert p.seq_diff(65535, 1) == -2
    assert p.seq_diff(5, 5) == 0
    assert p.seq_diff(100, 40000) == 100 - 40000 + 65536


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.binary(max_size=120), max_size=20), st.integers(0, 20))
def test_random_bytes_never_raise_and_good_frames_survive(chunks: list[bytes], where: int) -> None:
    """Garbage anywhere: the decoder never raises and every intact frame comes through."""
    good = [state_frame(seq) for seq in range(1, 4)]
    stream = b"".join(chunks[:where]) + good[0] + b"".join(chunks[where:]) + good[1] + good[2]
    decoder = p.FrameDecoder()
    frames = decoder.feed(stream)
    for frame in frames:
        if (
            frame.type == p.MsgType.STATE
            and frame.payload == p.State(7, frozenset({2}), False).encode()
        ):
            continue
        pytest.fail(f"phantom frame {frame}")  # 2**-32 chance per chunk; deterministic seeds
    assert [f.seq for f in frames] == [1, 2, 3]
    assert decoder.counters["good_frames"] == 3


def test_counters_account_for_every_rejected_chunk() -> None:
    rng = random.Random(4)
    decoder = p.FrameDecoder()
    expected_bad = 0
    for _ in range(2000):
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 90)))
        decoder.feed(b"\x00" + p.cobs_encode(body) + b"\x00")
        expected_bad += 1
    assert bad_total(decoder) == expected_bad
    assert decoder.counters["resyncs"] == expected_bad
    assert decoder.counters["good_frames"] == 0


@settings(max_examples=examples(2000), deadline=None)
@given(st.sampled_from(list(p.MsgType)), st.binary(max_size=p.MAX_PAYLOAD))
def test_any_payload_with_a_good_crc_decodes_canonically_or_is_refused(
    msg_type: p.MsgType, payload: bytes
) -> None:
    """A frame with a correct CRC but arbitrary payload: a ProtocolError or an exact message."""
    frame = p.Frame(p.PROTOCOL_VERSION, msg_type, 1, payload)
    try:
        msg = p.decode_message(frame)
    except p.ProtocolError:
        return
    assert msg_type == msg.TYPE
    assert msg.encode() == payload


def test_frame_size_limits_match_the_doc() -> None:
    """docs/protocol.md: body <= 72, encoded <= 73, on the wire <= 75; longest real frame 61."""
    assert (p.MAX_BODY, p.MAX_ENCODED, p.MAX_WIRE) == (72, 73, 75)
    longest = p.encode_frame(p.MsgType.ERROR, 0x0101, b"\x01" * p.MAX_PAYLOAD)
    assert len(longest) == p.MAX_WIRE
    error = p.encode_message(p.BoardErrorReport(1, "x" * p.MAX_TEXT_LEN), 0x0101)
    assert len(error) == 61
    assert p.BoardErrorReport(4, "brown-out").code_name == "power"
    assert p.BoardErrorReport(200, "?").code_name == "reserved"
