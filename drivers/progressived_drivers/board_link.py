"""The controller's end of a serial line for the conformance tool (``board-test``).

Unlike :class:`progressived_drivers.serial_board.SerialBoardDriver` it applies no protocol rules: it
records every frame the board sends (with the time it arrived) and every chunk the decoder
rejected, and sends whatever frame it is told, with any sequence number. The checks of
``progressived_drivers.board_test`` look at that record.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import serial_asyncio_fast

from progressived_drivers import protocol as p


@dataclass(frozen=True, slots=True)
class Received:
    """One CRC-good frame from the line; ``msg`` is None when its payload is not valid."""

    at: float
    frame: p.Frame
    msg: p.Message | None
    error: str = ""


class _Proto(asyncio.Protocol):
    def __init__(self, on_data: Callable[[bytes], None]) -> None:
        self.on_data = on_data
        self.lost = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self.on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set()


class BoardLink:
    """A recorded serial line to a board under test."""

    def __init__(self, port: str, baudrate: int = 115200) -> None:
        self.port = port
        self.baudrate = baudrate
        self.received: list[Received] = []
        self.rejected: list[tuple[str, bytes]] = []  # (kind, chunk) from the board's side
        self.decoder = p.FrameDecoder(
            on_reject=lambda kind, chunk: self.rejected.append((kind, chunk))
        )
        self.tx_seq = 0
        self.sent = 0
        self._new = asyncio.Event()
        self._transport: Any = None
        self._proto: _Proto | None = None

    async def open(self) -> None:
        """Open the port (raises OSError or serial.SerialException when it cannot)."""
        loop = asyncio.get_running_loop()
        proto = _Proto(self._on_data)
        transport, _ = await serial_asyncio_fast.create_serial_connection(
            loop, lambda: proto, self.port, baudrate=self.baudrate
        )
        self._transport, self._proto = transport, proto
        port: Any = transport.serial
        with contextlib.suppress(Exception):
            port.reset_input_buffer()

    async def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.abort()
        self._transport = None

    @property
    def lost(self) -> bool:
        return self._proto is not None and self._proto.lost.is_set()

    def _on_data(self, data: bytes) -> None:
        now = asyncio.get_running_loop().time()
        for frame in self.decoder.feed(data):
            try:
                msg: p.Message | None = p.decode_message(frame)
                error = ""
            except p.ProtocolError as exc:
                msg, error = None, str(exc)
            self.received.append(Received(now, frame, msg, error))
        self._new.set()

    # ------------------------------------------------------------------ sending

    def write(self, data: bytes) -> None:
        """Raw bytes on the line (malformed frames, garbage)."""
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    def send(self, msg: p.Message, seq: int | None = None) -> int:
        """``msg`` with the next sequence number (or exactly ``seq``, leaving ours alone)."""
        if seq is None:
            self.tx_seq = (self.tx_seq + 1) % p.SEQ_MOD
            seq = self.tx_seq
        self.write(p.encode_message(msg, seq))
        self.sent += 1
        return seq

    def send_raw_payload(self, msg_type: int, payload: bytes) -> int:
        """A frame of ``msg_type`` with any payload (valid or not), the next sequence number."""
        self.tx_seq = (self.tx_seq + 1) % p.SEQ_MOD
        self.write(p.encode_frame(msg_type, self.tx_seq, payload))
        self.sent += 1
        return self.tx_seq

    # ------------------------------------------------------------------ waiting

    def mark(self) -> int:
        """A position in :attr:`received`: wait for frames after it."""
        return len(self.received)

    async def wait_for(
        self, pred: Callable[[Received], bool], timeout: float, after: int | None = None
    ) -> Received | None:
        """The first frame after ``after`` (default: now) matching ``pred``, or None."""
        index = self.mark() if after is None else after
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            while index < len(self.received):
                item = self.received[index]
                index += 1
                if pred(item):
                    return item
            left = end - loop.time()
            if left <= 0:
                return None
            self._new.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new.wait(), left)

    async def ack_of(self, seq: int, timeout: float, after: int | None = None) -> bool:
        """Did the board acknowledge our frame ``seq`` (within ``timeout``)?"""
        item = await self.wait_for(
            lambda r: isinstance(r.msg, p.Ack) and r.msg.seq == seq, timeout, after
        )
        return item is not None
