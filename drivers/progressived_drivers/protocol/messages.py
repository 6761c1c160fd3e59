"""The messages of protocol v1 in both directions (docs/protocol.md, "Messages").

Why a module of its own: each message's payload layout and its validity rules, apart
from the framing that carries them; a CRC-checked :class:`Frame` in, a typed message out
(and back).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from progressived_drivers.protocol.framing import SEQ_MOD, Frame, ProtocolError, encode_frame

MAX_SEATS = 32
MAX_ID_LEN = 32
MAX_CODE_LEN = 16
MAX_TEXT_LEN = 48
CONTROLLER_BIT = 0x80


class MsgType(enum.IntEnum):
    """Frame types. Bit 7 set: sent by the controller; clear: sent by the board."""

    HELLO = 0x01
    HEARTBEAT = 0x02
    STATE = 0x03
    KEY = 0x04
    ACK = 0x05
    ERROR = 0x06
    C_HELLO = 0x81
    C_HEARTBEAT = 0x82
    C_LIGHTS = 0x83
    C_KEY_ACK = 0x84


BOARD_TYPES = frozenset(t for t in MsgType if not t & CONTROLLER_BIT)
CONTROLLER_TYPES = frozenset(t for t in MsgType if t & CONTROLLER_BIT)


class LightCode(enum.IntEnum):
    """Light patterns on the wire (same names as ``progressived.board.lights.Light``)."""

    IDLE = 0  # idle / attract
    BET = 1  # a wager is on the sensor
    LOCKED = 2  # wager locked in for the round
    WINNER = 3  # winning hand keyed at this seat
    CLOSED = 4  # progressive closed


def _pack_str(text: str, limit: int) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > limit:
        raise ProtocolError(f"string of {len(raw)} bytes (max {limit})")
    return bytes([len(raw)]) + raw


def _unpack_str(
    payload: bytes, offset: int, limit: int, ascii_only: bool = False
) -> tuple[str, int]:
    if offset >= len(payload):
        raise ProtocolError("missing string")
    size = payload[offset]
    end = offset + 1 + size
    if size > limit or end > len(payload):
        raise ProtocolError("bad string length")
    raw = payload[offset + 1 : end]
    try:
        text = raw.decode("ascii" if ascii_only else "utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("bad string encoding") from None
    if ascii_only and not all(33 <= b <= 126 for b in raw):
        raise ProtocolError("key code must be printable ASCII without spaces")
    return text, end


def _done(payload: bytes, offset: int) -> None:
    if offset != len(payload):
        raise ProtocolError("trailing bytes in payload")


def _seats_mask(seats: Iterable[int], limit: int) -> int:
    mask = 0
    for seat in seats:
        if not 1 <= seat <= limit:
            raise ProtocolError(f"seat {seat} outside 1..{limit}")
        mask |= 1 << (seat - 1)
    return mask


@dataclass(frozen=True, slots=True)
class Hello:
    """Board -> controller, at boot, on every (re)connection and in reply to a controller hello."""

    board_id: str
    boot_id: int  # random per boot; a new boot_id means the board rebooted
    seats: int
    key_base: int  # the highest key_seq the board has seen acknowledged (0 after boot)
    TYPE = MsgType.HELLO

    def encode(self) -> bytes:
        if not self.board_id or not 1 <= self.seats <= MAX_SEATS:
            raise ProtocolError("bad hello")
        return _pack_str(self.board_id, MAX_ID_LEN) + struct.pack(
            ">IBI", self.boot_id, self.seats, self.key_base
        )

    @classmethod
    def decode(cls, payload: bytes) -> Hello:
        board_id, off = _unpack_str(payload, 0, MAX_ID_LEN)
        if len(payload) != off + 9:
            raise ProtocolError("bad hello length")
        boot_id, seats, key_base = struct.unpack_from(">IBI", payload, off)
        if not board_id or not board_id.isprintable() or not 1 <= seats <= MAX_SEATS:
            raise ProtocolError("bad hello")
        return cls(board_id, boot_id, seats, key_base)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Either direction, every heartbeat interval. No payload."""

    TYPE = MsgType.HEARTBEAT

    def encode(self) -> bytes:
        return b""

    @classmethod
    def decode(cls, payload: bytes) -> Heartbeat:
        _done(payload, 0)
        return cls()


FLAG_SUPERVISOR = 0x01

#: ERROR codes (docs/protocol.md). The controller logs and counts them; none changes the table.
ERROR_CODES = {
    0: "other",
    1: "sensor_fault",
    2: "light_fault",
    3: "keypad_fault",
    4: "power",
    5: "storage",
    6: "line_errors",
}


@dataclass(frozen=True, slots=True)
class State:
    """Board -> controller: the FULL sensor state, on every change and periodically."""

    seats: int
    present: frozenset[int]
    supervisor: bool
    TYPE = MsgType.STATE

    def encode(self) -> bytes:
        if not 1 <= self.seats <= MAX_SEATS:
            raise ProtocolError("bad seat count")
        flags = FLAG_SUPERVISOR if self.supervisor else 0
        return struct.pack(">BIB", self.seats, _seats_mask(self.present, self.seats), flags)

    @classmethod
    def decode(cls, payload: bytes) -> State:
        if len(payload) != 6:
            raise ProtocolError("bad state length")
        seats, mask, flags = struct.unpack(">BIB", payload)
        if not 1 <= seats <= MAX_SEATS:
            raise ProtocolError("bad seat count")
        if mask >> seats:
            raise ProtocolError("sensor bit beyond the board's seats")
        if flags & ~FLAG_SUPERVISOR:
            raise ProtocolError("unknown state flags")
        present = frozenset(i + 1 for i in range(seats) if mask >> i & 1)
        return cls(seats, present, bool(flags & FLAG_SUPERVISOR))


@dataclass(frozen=True, slots=True)
class Key:
    """Board -> controller: a key press, retransmitted until acknowledged."""

    key_seq: int  # 1, 2, 3 ... per boot
    code: str
    TYPE = MsgType.KEY

    def encode(self) -> bytes:
        if not 1 <= self.key_seq <= 0xFFFFFFFF or not all(33 <= ord(c) <= 126 for c in self.code):
            raise ProtocolError("bad key event")
        return struct.pack(">I", self.key_seq) + _pack_str(self.code, MAX_CODE_LEN)

    @classmethod
    def decode(cls, payload: bytes) -> Key:
        if len(payload) < 5:
            raise ProtocolError("bad key length")
        (key_seq,) = struct.unpack_from(">I", payload)
        code, off = _unpack_str(payload, 4, MAX_CODE_LEN, ascii_only=True)
        _done(payload, off)
        if key_seq == 0 or not code:
            raise ProtocolError("bad key event")
        return cls(key_seq, code)


@dataclass(frozen=True, slots=True)
class Ack:
    """Board -> controller: acknowledges a controller command frame by its sequence number."""

    seq: int
    TYPE = MsgType.ACK

    def encode(self) -> bytes:
        return struct.pack(">H", self.seq % SEQ_MOD)

    @classmethod
    def decode(cls, payload: bytes) -> Ack:
        if len(payload) != 2:
            raise ProtocolError("bad ack length")
        return cls(struct.unpack(">H", payload)[0])


@dataclass(frozen=True, slots=True)
class BoardErrorReport:
    """Board -> controller: something is wrong on the board (code + short text)."""

    code: int
    text: str
    TYPE = MsgType.ERROR

    def encode(self) -> bytes:
        return bytes([self.code & 0xFF]) + _pack_str(self.text, MAX_TEXT_LEN)

    @property
    def code_name(self) -> str:
        """The documented name of ``code`` (``reserved`` for codes not in the table)."""
        return ERROR_CODES.get(self.code, "reserved")

    @classmethod
    def decode(cls, payload: bytes) -> BoardErrorReport:
        if not payload:
            raise ProtocolError("bad error length")
        text, off = _unpack_str(payload, 1, MAX_TEXT_LEN)
        _done(payload, off)
        return cls(payload[0], text)


@dataclass(frozen=True, slots=True)
class ControllerHello:
    """Controller -> board, on connection and while the board is offline."""

    heartbeat_ms: int
    TYPE = MsgType.C_HELLO

    def encode(self) -> bytes:
        return struct.pack(">H", max(10, min(self.heartbeat_ms, 60000)))

    @classmethod
    def decode(cls, payload: bytes) -> ControllerHello:
        if len(payload) != 2:
            raise ProtocolError("bad hello length")
        (ms,) = struct.unpack(">H", payload)
        if not 10 <= ms <= 60000:
            raise ProtocolError("bad heartbeat interval")
        return cls(ms)


@dataclass(frozen=True, slots=True)
class ControllerHeartbeat:
    TYPE = MsgType.C_HEARTBEAT

    def encode(self) -> bytes:
        return b""

    @classmethod
    def decode(cls, payload: bytes) -> ControllerHeartbeat:
        _done(payload, 0)
        return cls()


@dataclass(frozen=True, slots=True)
class Lights:
    """Controller -> board: the pattern of every seat's light (seat 1 first). Acked by ACK."""

    codes: tuple[LightCode, ...]
    TYPE = MsgType.C_LIGHTS

    def encode(self) -> bytes:
        if len(self.codes) > MAX_SEATS:
            raise ProtocolError("too many seats")
        return bytes([len(self.codes), *(int(c) for c in self.codes)])

    @classmethod
    def decode(cls, payload: bytes) -> Lights:
        if not payload or payload[0] != len(payload) - 1 or payload[0] > MAX_SEATS:
            raise ProtocolError("bad lights length")
        try:
            return cls(tuple(LightCode(b) for b in payload[1:]))
        except ValueError:
            raise ProtocolError("unknown light code") from None


@dataclass(frozen=True, slots=True)
class KeyAck:
    """Controller -> board: every key with key_seq <= this one has been received."""

    key_seq: int
    TYPE = MsgType.C_KEY_ACK

    def encode(self) -> bytes:
        return struct.pack(">I", self.key_seq)

    @classmethod
    def decode(cls, payload: bytes) -> KeyAck:
        if len(payload) != 4:
            raise ProtocolError("bad key ack length")
        return cls(struct.unpack(">I", payload)[0])


Message = (
    Hello
    | Heartbeat
    | State
    | Key
    | Ack
    | BoardErrorReport
    | ControllerHello
    | ControllerHeartbeat
    | Lights
    | KeyAck
)

_DECODERS: dict[int, type[Message]] = {
    MsgType.HELLO: Hello,
    MsgType.HEARTBEAT: Heartbeat,
    MsgType.STATE: State,
    MsgType.KEY: Key,
    MsgType.ACK: Ack,
    MsgType.ERROR: BoardErrorReport,
    MsgType.C_HELLO: ControllerHello,
    MsgType.C_HEARTBEAT: ControllerHeartbeat,
    MsgType.C_LIGHTS: Lights,
    MsgType.C_KEY_ACK: KeyAck,
}


def decode_message(frame: Frame) -> Message:
    """The message in a CRC-checked frame; raises :class:`ProtocolError` if it is not one."""
    cls = _DECODERS.get(frame.type)
    if cls is None:
        raise ProtocolError(f"unknown frame type 0x{frame.type:02x}")
    return cls.decode(frame.payload)


def encode_message(msg: Message, seq: int) -> bytes:
    return encode_frame(msg.TYPE, seq, msg.encode())
