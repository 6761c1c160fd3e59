"""The controller <-> table sensor-board wire protocol, version 1 (see docs/protocol.md).

Pure code, no I/O. The serial driver, the board simulator, the conformance test and the
fuzz tests use it as one namespace (``from drivers import protocol as p``); it is built from
one module per layer, so a board maker can read them in the order the doc presents them:

* :mod:`progressived_drivers.protocol.framing` -- COBS, the body layout, CRC-32
  (``0x00 COBS(body) 0x00``);
* :mod:`progressived_drivers.protocol.stream` -- the resynchronising stream decoder and its
  counters;
* :mod:`progressived_drivers.protocol.sequence` -- 16-bit sequence-number arithmetic;
* :mod:`progressived_drivers.protocol.messages` -- the messages of both directions and their codecs.
"""

from __future__ import annotations

from progressived_drivers.protocol.framing import (
    CRC,
    DELIMITER,
    HEADER,
    MAX_BODY,
    MAX_ENCODED,
    MAX_PAYLOAD,
    MAX_WIRE,
    MIN_BODY,
    PROTOCOL_VERSION,
    SEQ_MOD,
    SUPPORTED_VERSIONS,
    CrcError,
    Frame,
    ProtocolError,
    cobs_decode,
    cobs_encode,
    decode_body,
    encode_body,
    encode_frame,
)
from progressived_drivers.protocol.messages import (
    BOARD_TYPES,
    CONTROLLER_BIT,
    CONTROLLER_TYPES,
    ERROR_CODES,
    FLAG_SUPERVISOR,
    MAX_CODE_LEN,
    MAX_ID_LEN,
    MAX_SEATS,
    MAX_TEXT_LEN,
    Ack,
    BoardErrorReport,
    ControllerHeartbeat,
    ControllerHello,
    Heartbeat,
    Hello,
    Key,
    KeyAck,
    LightCode,
    Lights,
    Message,
    MsgType,
    State,
    decode_message,
    encode_message,
)
from progressived_drivers.protocol.sequence import seq_diff
from progressived_drivers.protocol.stream import COUNTER_NAMES, FrameDecoder

__all__ = [
    "BOARD_TYPES",
    "CONTROLLER_BIT",
    "CONTROLLER_TYPES",
    "COUNTER_NAMES",
    "CRC",
    "DELIMITER",
    "ERROR_CODES",
    "FLAG_SUPERVISOR",
    "HEADER",
    "MAX_BODY",
    "MAX_CODE_LEN",
    "MAX_ENCODED",
    "MAX_ID_LEN",
    "MAX_PAYLOAD",
    "MAX_SEATS",
    "MAX_TEXT_LEN",
    "MAX_WIRE",
    "MIN_BODY",
    "PROTOCOL_VERSION",
    "SEQ_MOD",
    "SUPPORTED_VERSIONS",
    "Ack",
    "BoardErrorReport",
    "ControllerHeartbeat",
    "ControllerHello",
    "CrcError",
    "Frame",
    "FrameDecoder",
    "Heartbeat",
    "Hello",
    "Key",
    "KeyAck",
    "LightCode",
    "Lights",
    "Message",
    "MsgType",
    "ProtocolError",
    "State",
    "cobs_decode",
    "cobs_encode",
    "decode_body",
    "decode_message",
    "encode_body",
    "encode_frame",
    "encode_message",
    "seq_diff",
]
