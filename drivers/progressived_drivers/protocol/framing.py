"""Framing of protocol v1 (docs/protocol.md, "Frames"): COBS, the body layout and its CRC-32.

Why a module of its own: this is the layer a board maker implements first and tests
byte for byte; it knows nothing of what a payload means. A frame on the wire is
``0x00 COBS(body) 0x00`` where ``body`` is::

    version u8 | type u8 | seq u16 | payload (0..MAX_PAYLOAD bytes) | crc32 u32

(big-endian; the CRC is ``zlib.crc32`` of everything before it: CRC-32/ISO-HDLC).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

PROTOCOL_VERSION = 1
SUPPORTED_VERSIONS = frozenset({PROTOCOL_VERSION})
DELIMITER = 0x00
HEADER = struct.Struct(">BBH")
CRC = struct.Struct(">I")
MAX_PAYLOAD = 64
MIN_BODY = HEADER.size + CRC.size
MAX_BODY = MIN_BODY + MAX_PAYLOAD
#: The longest COBS encoding of a MAX_BODY body (one overhead byte per 254 bytes).
MAX_ENCODED = MAX_BODY + MAX_BODY // 254 + 1
#: The longest frame on the wire: MAX_ENCODED plus the two delimiters (72 + 1 + 2 = 75 bytes).
MAX_WIRE = MAX_ENCODED + 2
SEQ_MOD = 1 << 16


class ProtocolError(ValueError):
    """A frame or payload that does not follow the protocol."""


# --------------------------------------------------------------------------- COBS


def cobs_encode(data: bytes) -> bytes:
    """Consistent Overhead Byte Stuffing: the result contains no zero byte."""
    out = bytearray()
    block = bytearray()
    for byte in data:
        if byte == 0:
            out.append(len(block) + 1)
            out += block
            block.clear()
        else:
            block.append(byte)
            if len(block) == 254:
                out.append(255)
                out += block
                block.clear()
    out.append(len(block) + 1)
    out += block
    return bytes(out)


def cobs_decode(data: bytes) -> bytes:
    """Inverse of :func:`cobs_encode`; raises :class:`ProtocolError` on a bad encoding."""
    out = bytearray()
    index, size = 0, len(data)
    while index < size:
        code = data[index]
        if code == 0:
            raise ProtocolError("zero byte inside a COBS block")
        end = index + code
        if end > size:
            raise ProtocolError("truncated COBS block")
        block = data[index + 1 : end]
        if 0 in block:
            raise ProtocolError("zero byte inside a COBS block")
        out += block
        index = end
        if code != 255 and index < size:
            out.append(0)
    return bytes(out)


# --------------------------------------------------------------------------- frames


@dataclass(frozen=True, slots=True)
class Frame:
    """One CRC-checked frame."""

    version: int
    type: int
    seq: int
    payload: bytes


def encode_body(msg_type: int, seq: int, payload: bytes, version: int = PROTOCOL_VERSION) -> bytes:
    if len(payload) > MAX_PAYLOAD:
        raise ProtocolError(f"payload of {len(payload)} bytes (max {MAX_PAYLOAD})")
    head = HEADER.pack(version, msg_type, seq % SEQ_MOD) + payload
    return head + CRC.pack(zlib.crc32(head))


def encode_frame(
    msg_type: int, seq: int, payload: bytes = b"", version: int = PROTOCOL_VERSION
) -> bytes:
    """The bytes on the wire for one frame, with a delimiter on both sides."""
    return b"\x00" + cobs_encode(encode_body(msg_type, seq, payload, version)) + b"\x00"


def decode_body(body: bytes) -> Frame:
    """Check length and CRC of a decoded body; raises :class:`ProtocolError`."""
    if len(body) < MIN_BODY:
        raise ProtocolError("truncated frame")
    if len(body) > MAX_BODY:
        raise ProtocolError("oversized frame")
    head, crc = body[: -CRC.size], CRC.unpack(body[-CRC.size :])[0]
    if zlib.crc32(head) != crc:
        raise CrcError("CRC mismatch")
    version, msg_type, seq = HEADER.unpack_from(head)
    return Frame(version, msg_type, seq, bytes(head[HEADER.size :]))


class CrcError(ProtocolError):
    """The frame's CRC does not match its contents."""
