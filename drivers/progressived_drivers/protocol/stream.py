"""The resynchronising stream decoder: a byte stream from the serial line in, frames out.

Why a module of its own: the decoder holds state across reads (a partial frame, whether
it is skipping garbage) and keeps the wire-error counters the driver exports, where
:mod:`progressived_drivers.protocol.framing` is stateless, one frame at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from progressived_drivers.protocol.framing import (
    MAX_ENCODED,
    SUPPORTED_VERSIONS,
    CrcError,
    Frame,
    ProtocolError,
    cobs_decode,
    decode_body,
)

COUNTER_NAMES = (
    "good_frames",
    "crc_errors",
    "malformed",
    "oversized",
    "bad_version",
    "resyncs",
    "bytes_discarded",
)


@dataclass
class FrameDecoder:
    """Turns a byte stream into frames, resynchronising on the next delimiter after garbage.

    Every rejected chunk is counted once (``crc_errors``, ``malformed``, ``oversized`` or
    ``bad_version``) and counts one ``resyncs``; its bytes count in ``bytes_discarded``.
    Never raises on input. ``on_reject(kind, chunk)``, when given, hears of every rejected
    chunk: ``kind`` is ``crc_error``, ``truncated``, ``malformed``, ``oversized`` or
    ``bad_version`` (a truncated frame counts in ``malformed``).
    """

    max_encoded: int = MAX_ENCODED
    on_reject: Callable[[str, bytes], None] | None = None
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTER_NAMES, 0))
    _buf: bytearray = field(default_factory=bytearray)
    _discarding: bool = False

    def feed(self, data: bytes) -> list[Frame]:
        frames: list[Frame] = []
        parts = bytes(data).split(b"\x00")
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            if self._discarding:
                self.counters["bytes_discarded"] += len(part)
                if not last:
                    self._discarding = False
                continue
            self._buf += part
            if len(self._buf) > self.max_encoded:
                self._reject("oversized", len(self._buf), "oversized", bytes(self._buf))
                self._buf.clear()
                # ended by a delimiter in this same part: already back in sync
                self._discarding = last
                continue
            if last:
                break
            chunk = bytes(self._buf)
            self._buf.clear()
            if chunk:
                frame = self._decode(chunk)
                if frame is not None:
                    frames.append(frame)
        return frames

    def reset(self) -> None:
        """Forget a partial frame (a new connection)."""
        self._buf.clear()
        self._discarding = False

    def _reject(self, counter: str, size: int, kind: str, chunk: bytes) -> None:
        self.counters[counter] += 1
        self.counters["resyncs"] += 1
        self.counters["bytes_discarded"] += size
        if self.on_reject is not None:
            self.on_reject(kind, chunk)

    def _decode(self, chunk: bytes) -> Frame | None:
        try:
            frame = decode_body(cobs_decode(chunk))
        except CrcError:
            self._reject("crc_errors", len(chunk), "crc_error", chunk)
            return None
        except ProtocolError as exc:
            kind = "truncated" if "truncated" in str(exc) else "malformed"
            self._reject("malformed", len(chunk), kind, chunk)
            return None
        if frame.version not in SUPPORTED_VERSIONS:
            self._reject("bad_version", len(chunk), "bad_version", chunk)
            return None
        self.counters["good_frames"] += 1
        return frame
