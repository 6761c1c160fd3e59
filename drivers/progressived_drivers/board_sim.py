"""A table sensor board simulated on a pseudo-terminal, speaking the board side of protocol v1.

The daemon and the tests reach it through the real serial driver: the simulator owns the
master side of a pty and the driver opens the slave path (or the ``link`` symlink to it,
which plays the part of ``/dev/serial/by-id/...``). ``unplug()`` closes the pty and removes
the link, so the driver sees the device disappear; ``replug()`` makes a new pty at the same
link. Used by ``progressivectl simulate-board`` and by the tests. This module is the
board's behaviour; the pty and the link under it are :mod:`progressived_drivers.sim_pty`, the
command
language :mod:`progressived_drivers.board_sim_script`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path

from progressived.board.lights import Light
from progressived_drivers import protocol as p
from progressived_drivers.board_sim_script import (
    SIM_COMMANDS_HELP,
    SimCommandError,
    format_lights,
    run_sim_command,
)
from progressived_drivers.sim_pty import SimPty

__all__ = ["SIM_COMMANDS_HELP", "SIM_FAULTS", "BoardSimulator", "SimCommandError", "format_lights"]

LIGHT_OF_CODE = {code: Light[code.name] for code in p.LightCode}

#: Deliberate protocol violations, for testing conformance tools (``faults=``). Never use
#: them to stand in for a board: the simulator without faults follows docs/protocol.md.
SIM_FAULTS = {
    "lenient": "accepts controller frames before the first C_HELLO since boot",
    "no_hello_reply": "does not answer a C_HELLO with HELLO",
    "ack_stale": "acknowledges duplicate and older LIGHTS instead of dropping them",
    "no_key_retransmit": "sends each key press once, never again",
    "bad_crc": "sends its heartbeats with a wrong CRC",
    "no_periodic_state": "sends STATE only on a change and after a HELLO, never periodically",
    "no_key_after_hello": "does not resend unacknowledged KEYs after a C_HELLO (only per beat)",
}


class BoardSimulator:
    """The board side of the protocol on a pty. Create and use it inside a running loop."""

    def __init__(
        self,
        *,
        board_id: str = "SIM-1",
        seats: int = 7,
        link: str | Path | None = None,
        heartbeat_interval_s: float = 1.0,
        state_every: int = 5,
        on_output: Callable[[str], None] | None = None,
        faults: Iterable[str] = (),
        group: int | None = None,
    ) -> None:
        """``group``: the gid each pty is given, mode 0660 (:class:`SimPty`)."""
        if not 1 <= seats <= p.MAX_SEATS:
            raise ValueError(f"seats must be 1..{p.MAX_SEATS}")
        self.faults = frozenset(faults)
        if unknown := self.faults - SIM_FAULTS.keys():
            raise ValueError(f"unknown simulator faults: {', '.join(sorted(unknown))}")
        self.board_id = board_id
        self.seats = seats
        self.link = Path(link) if link is not None else None
        self.heartbeat_interval_s = heartbeat_interval_s
        self.state_every = max(1, state_every)
        self.on_output = on_output
        self.present: set[int] = set()
        self.supervisor_on = False
        self.frozen = False
        self.counters: dict[str, int] = {
            "frames_sent": 0,
            "tx_dropped": 0,
            "lights_received": 0,
            "key_acks": 0,
            "controller_hellos": 0,
            "stale_frames": 0,
            "bad_payload": 0,
            "wrong_direction": 0,
            "unexpected": 0,
        }
        self._lights: dict[int, Light] = dict.fromkeys(range(1, seats + 1), Light.CLOSED)
        self._pty = SimPty(self.link, self._readable, self._dropped, group)
        self._decoder = p.FrameDecoder()
        self._task: asyncio.Task[None] | None = None
        self._last_controller_rx: float | None = None
        self._failsafe = False
        self._beats_since_state = 0  # HEARTBEATs sent since the last STATE (any STATE)
        self._boot()

    # ------------------------------------------------------------------ state

    def _boot(self) -> None:
        self.boot_id = secrets.randbits(32)
        self.key_seq = 0
        self.key_acked = 0
        self.pending: list[tuple[int, str]] = []
        self.tx_seq = 0
        self._rx_seq: int | None = None

    @property
    def lights(self) -> dict[int, Light]:
        return dict(self._lights)

    @property
    def decoder_counters(self) -> dict[str, int]:
        return dict(self._decoder.counters)

    @property
    def plugged(self) -> bool:
        return self._pty.plugged

    @property
    def path(self) -> str | None:
        """The pty's slave path (the link points at it); None before the first start."""
        return self._pty.path

    def _dropped(self, count: int) -> None:
        self.counters["tx_dropped"] += count  # nobody reading: the UART drops

    def _out(self, line: str) -> None:
        if self.on_output is not None:
            self.on_output(line)

    # ------------------------------------------------------------------ pty

    async def start(self) -> str:
        """Create the pty (and the link), say hello; returns the path the driver opens."""
        path = self._open()
        self._task = asyncio.get_running_loop().create_task(self._beat())
        return path

    def _open(self) -> str:
        self._decoder.reset()
        path = self._pty.open()
        self._hello()
        return path

    def _close(self) -> None:
        self._pty.close()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._close()

    # ------------------------------------------------------------------ sending

    def send_raw(self, data: bytes) -> None:
        """Bytes on the line exactly as given (noise, crafted or replayed frames)."""
        self._pty.write(data)

    async def send_frames(self, frames: Iterable[bytes], piece: int = 4096) -> None:
        """Write many whole frames without dropping any (waits while the pty is full).

        Frames the board sends meanwhile (heartbeats) go on the line between pieces, never
        inside a frame. Used for floods and fuzzing.
        """
        await self._pty.write_frames(frames, piece)

    def frame(self, msg: p.Message, seq: int | None = None) -> bytes:
        """The wire bytes of ``msg`` with the next sequence number (or ``seq``)."""
        if seq is None:
            self.tx_seq = (self.tx_seq + 1) % p.SEQ_MOD
            seq = self.tx_seq
        return p.encode_message(msg, seq)

    def send(self, msg: p.Message) -> bytes:
        data = self.frame(msg)
        if not self.frozen:
            self.send_raw(data)
            self.counters["frames_sent"] += 1
        return data

    def _hello(self) -> None:
        self.send(p.Hello(self.board_id, self.boot_id, self.seats, self.key_acked))
        self._send_state()

    def _send_state(self) -> None:
        self.send(p.State(self.seats, frozenset(self.present), self.supervisor_on))
        self._beats_since_state = 0

    def _send_pending(self) -> None:
        if "no_key_retransmit" in self.faults:
            return
        for key_seq, code in self.pending:
            self.send(p.Key(key_seq, code))

    async def _beat(self) -> None:
        while True:
            # a new interval from a C_HELLO applies from the heartbeat after the one due
            await asyncio.sleep(self.heartbeat_interval_s)
            if not self.plugged or self.frozen:
                continue
            self._beats_since_state += 1
            if "bad_crc" in self.faults:
                beat = bytearray(self.frame(p.Heartbeat()))
                beat[-2] ^= 0x01 if beat[-2] != 0x01 else 0x03  # a CRC byte, never a zero
                self.send_raw(bytes(beat))
            else:
                self.send(p.Heartbeat())
            if self._beats_since_state >= self.state_every and (
                "no_periodic_state" not in self.faults
            ):
                self._send_state()  # at most state_every HEARTBEATs between two STATEs
            self._send_pending()
            self._check_failsafe()

    def _check_failsafe(self) -> None:
        """No word from the controller for 3 heartbeats: show the table closed."""
        now = asyncio.get_running_loop().time()
        last = self._last_controller_rx
        silent = last is None or now - last > 3 * self.heartbeat_interval_s
        if silent and not self._failsafe:
            self._failsafe = True
            if last is not None:
                self._show(
                    dict.fromkeys(range(1, self.seats + 1), Light.CLOSED), "controller silent"
                )

    def _show(self, lights: dict[int, Light], why: str = "") -> None:
        if lights != self._lights:
            self._lights = lights
            self._out(format_lights(lights) + (f"  ({why})" if why else ""))

    # ------------------------------------------------------------------ receiving

    def _readable(self) -> None:
        data = self._pty.read()
        if self.frozen or not data:
            return
        for frame in self._decoder.feed(data):
            self._on_frame(frame)

    def _on_frame(self, frame: p.Frame) -> None:
        """The board's receive rules, exactly as docs/protocol.md states them."""
        if not frame.type & p.CONTROLLER_BIT:
            self.counters["wrong_direction"] += 1  # our own frame echoed
            return
        try:
            msg = p.decode_message(frame)
        except p.ProtocolError:
            self.counters["bad_payload"] += 1
            return
        if isinstance(msg, p.ControllerHello):
            self.counters["controller_hellos"] += 1
            self._rx_seq = frame.seq  # a hello resets the expectation, whatever its seq
            self.heartbeat_interval_s = msg.heartbeat_ms / 1000
            self._controller_alive()
            if "no_hello_reply" not in self.faults:
                self._hello()
                if "no_key_after_hello" not in self.faults:
                    self._send_pending()
            return
        if self._rx_seq is None:
            if "lenient" not in self.faults:
                self.counters["unexpected"] += 1  # nothing but a hello before the first hello
                return
        elif p.seq_diff(frame.seq, self._rx_seq) <= 0 and "ack_stale" not in self.faults:
            self.counters["stale_frames"] += 1
            return
        self._rx_seq = frame.seq
        self._controller_alive()
        if isinstance(msg, p.Lights):
            self.counters["lights_received"] += 1
            self.send(p.Ack(frame.seq))
            shown = {
                seat: LIGHT_OF_CODE[code]
                for seat, code in enumerate(msg.codes[: self.seats], start=1)
            }
            self._show({**dict.fromkeys(range(1, self.seats + 1), Light.IDLE), **shown})
        elif isinstance(msg, p.KeyAck):
            self.counters["key_acks"] += 1
            if msg.key_seq <= self.key_seq:
                self.key_acked = max(self.key_acked, msg.key_seq)
                self.pending = [k for k in self.pending if k[0] > msg.key_seq]

    def _controller_alive(self) -> None:
        self._last_controller_rx = asyncio.get_running_loop().time()
        self._failsafe = False

    # ------------------------------------------------------------------ the table

    def _seat(self, seat: int) -> int:
        if not 1 <= seat <= self.seats:
            raise SimCommandError(f"seat {seat} outside 1..{self.seats}")
        return seat

    def place_bet(self, seat: int) -> None:
        self.present.add(self._seat(seat))
        self._send_state()

    def remove_bet(self, seat: int) -> None:
        self.present.discard(self._seat(seat))
        self._send_state()

    def press(self, code: str) -> int:
        """Press a key; returns its key_seq. Retransmitted until the controller acks it."""
        if not 1 <= len(code) <= p.MAX_CODE_LEN or not all(33 <= ord(c) <= 126 for c in code):
            raise SimCommandError(f"bad key code {code!r}: 1 to 16 printable ASCII, no spaces")
        self.key_seq += 1
        self.pending.append((self.key_seq, code))
        self.send(p.Key(self.key_seq, code))
        return self.key_seq

    def supervisor(self, on: bool) -> None:
        self.supervisor_on = on
        self._send_state()

    def unplug(self) -> None:
        self._close()

    def replug(self) -> str:
        if self.plugged:
            return str(self.link) if self.link is not None else str(self.path)
        return self._open()

    def freeze(self) -> None:
        self.frozen = True

    def thaw(self) -> None:
        self.frozen = False

    def reboot(self) -> None:
        """Restart: new boot id, sequences from zero, unacknowledged key presses lost."""
        self._boot()
        self._decoder.reset()
        self._show(dict.fromkeys(range(1, self.seats + 1), Light.CLOSED), "reboot")
        self._hello()

    def inject_noise(self, count: int) -> None:
        self.send_raw(os.urandom(count))

    def report_error(self, code: int, text: str) -> None:
        self.send(p.BoardErrorReport(code, text))

    def status(self) -> str:
        return (
            f"board {self.board_id} boot {self.boot_id:08x} "
            f"{'plugged' if self.plugged else 'unplugged'}{' frozen' if self.frozen else ''} "
            f"path {self.path} bets {sorted(self.present)} "
            f"supervisor {'on' if self.supervisor_on else 'off'} "
            f"key_seq {self.key_seq} pending {len(self.pending)}"
        )

    # ------------------------------------------------------------------ scripts

    async def run_command(self, line: str) -> bool:
        """Run one command line (``SIM_COMMANDS_HELP``); False for ``quit``.

        Raises SimCommandError.
        """
        return await run_sim_command(self, line)
