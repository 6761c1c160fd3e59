"""The serial sensor-board driver: protocol v1 (docs/protocol.md) over pyserial-asyncio-fast.

Open the board by a stable path: on Linux a USB serial adapter appears as
``/dev/serial/by-id/usb-<vendor>_<product>_<serial>-if00-port0`` (a symlink that keeps its
name across replugs and reboots, unlike ``/dev/ttyUSB0``). When the port disappears (USB
unplug, pty closed) the driver reports :class:`BoardOffline` and reopens the same path with
exponential backoff (jittered, :class:`progressived.runtime.backoff.Backoff`) until the
board is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from types import MappingProxyType
from typing import Any

import serial
import serial_asyncio_fast

from progressived.board.lights import Light
from progressived.runtime.backoff import Backoff
from progressived_drivers import protocol as p
from progressived_drivers.base import (
    BoardEvent,
    BoardOffline,
    KeyPressed,
)
from progressived_drivers.board_settings import (
    DRIVER_COUNTERS,
    BoardSettings,
    board_settings_from_config,
    light_codes,
)
from progressived_drivers.serial_receive import BoardReceiver
from progressived_drivers.wire_log import DriverLog

STOPPED = "driver stopped"  # the offline reason of a stop asked for

__all__ = [
    "DRIVER_COUNTERS",
    "BoardSettings",
    "SerialBoardDriver",
    "board_settings_from_config",
    "light_codes",
]


class _Link(asyncio.Protocol):
    def __init__(self, driver: SerialBoardDriver) -> None:
        self.driver = driver
        self.lost = asyncio.Event()
        self.reason = "port closed"

    def data_received(self, data: bytes) -> None:
        self.driver._on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.reason = f"port lost: {exc}" if exc else "port closed"
        self.lost.set()


def _factory(link: _Link) -> Callable[[], _Link]:
    return lambda: link


class SerialBoardDriver(BoardReceiver):
    """A :class:`progressived_drivers.base.BoardDriver` for a sensor board on a serial port."""

    def __init__(
        self, settings: BoardSettings, *, clock: Callable[[], float] | None = None
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._counters: dict[str, int] = dict.fromkeys(DRIVER_COUNTERS, 0)
        self._log = DriverLog(settings.port, self._counters, clock=self._now_or_monotonic)
        self._decoder = p.FrameDecoder(on_reject=self._log.wire_error)
        self._lights_unacked_since: float | None = None
        self._events: asyncio.Queue[BoardEvent] = asyncio.Queue()
        self._stop = asyncio.Event()
        self._transport: asyncio.Transport | None = None
        self._online = False
        self._have_hello = False
        self._board_id = ""
        self._boot_id = -1
        self._board_seats = 0
        self._table_size = 0
        self._rx_seq = 0
        self._tx_seq = 0
        self._last_rx = 0.0
        self._last_hb_tx = -1e9
        self._last_tx = 0.0  # when we last wrote a frame (a longer silence is a stall)
        self._last_key = 0  # the last key press delivered to the daemon (this boot)
        self._acked_key = 0  # the last key press the daemon handled: acknowledged to the board
        self._present: frozenset[int] | None = None
        self._supervisor = False
        self._lights: tuple[p.LightCode, ...] | None = None
        self._lights_seq: int | None = None  # unacknowledged lights frame
        self._lights_sent_at = 0.0
        self.last_board_error: tuple[int, str] | None = None

    # ------------------------------------------------------------------ public API

    @property
    def counters(self) -> Mapping[str, int]:
        return MappingProxyType({**self._decoder.counters, **self._counters})

    @property
    def online(self) -> bool:
        return self._online

    @property
    def board_id(self) -> str:
        return self._board_id

    @property
    def lights_acked(self) -> bool:
        """True when the board acknowledged the last lights sent."""
        return self._lights is not None and self._lights_seq is None

    async def next_event(self) -> BoardEvent:
        self._log.adopt_context()
        return await self._events.get()

    def next_event_nowait(self) -> BoardEvent | None:
        try:
            return self._events.get_nowait()
        except asyncio.QueueEmpty:
            return None

    async def events(self) -> AsyncIterator[BoardEvent]:
        while True:
            yield await self._events.get()

    async def set_lights(self, lights: Mapping[int, Light]) -> None:
        self._log.adopt_context()
        # the daemon gives a light for every seat of the table: its highest is the table's size
        self._table_size = max(self._table_size, max(lights, default=0))
        codes = light_codes(lights, max(self._table_seats(), max(lights, default=1)))
        if self._online and self._board_seats < self._required_seats():
            self._have_hello = False  # the board's HELLOs are refused from now on
            self._counters["too_few_seats"] += 1
            self._log.repeated(
                "error",
                "board.too_few_seats",
                board_id=self._board_id,
                board_seats=self._board_seats,
                seats=self._required_seats(),
            )
            self._go_offline(
                f"board has {self._board_seats} seats, the table {self._required_seats()}"
            )
        if codes == self._lights:
            return
        self._lights = codes
        self._lights_seq = None
        if self._online:
            self._send_lights()

    async def stop(self) -> None:
        self._stop.set()
        if self._transport is not None and not self._transport.is_closing():
            self._transport.abort()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = Backoff(self.settings.reconnect_initial_s, self.settings.reconnect_max_s)
        opened_before = False
        while not self._stop.is_set():
            link = _Link(self)
            try:
                transport, _ = await serial_asyncio_fast.create_serial_connection(
                    loop,
                    _factory(link),
                    self.settings.port,
                    baudrate=self.settings.baudrate,
                    exclusive=self.settings.exclusive,
                )
            except (OSError, serial.SerialException, ValueError) as exc:
                self._counters["connect_failures"] += 1
                delay = backoff.next()
                self._log.connect_failed(str(exc), delay)
                await self._sleep(delay)
                continue
            self._counters["reconnects" if opened_before else "connects"] += 1
            opened_before = True
            self._log.connected()
            self._log.info("board.port_open")
            hellos = self._counters["hellos"]
            await self._session(transport, link)
            if self._counters["hellos"] > hellos:
                backoff.reset()
            if not self._stop.is_set():
                self._log.warning("board.port_lost", reason=link.reason)
                await self._sleep(backoff.next())
        if self._online:
            self._go_offline(STOPPED)

    # ------------------------------------------------------------------ connection

    def _now(self) -> float:
        return self._clock() if self._clock else asyncio.get_running_loop().time()

    def _now_or_monotonic(self) -> float:
        try:
            return self._now()
        except RuntimeError:  # no running loop (a decoder fed outside the driver's loop)
            return time.monotonic()

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    async def _session(self, transport: Any, link: _Link) -> None:
        self._transport = transport
        self._decoder.reset()
        self._have_hello = False
        with contextlib.suppress(Exception):
            transport.serial.reset_input_buffer()  # stale bytes from before we opened
        tick = self.settings.heartbeat_interval_s / 4
        self._last_hb_tx = -1e9
        self._last_tx = self._now()
        try:
            while not self._stop.is_set() and not link.lost.is_set():
                self._tick()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(link.lost.wait(), tick)
        finally:
            self._transport = None
            if not transport.is_closing():
                transport.abort()
        if self._online:
            self._go_offline(link.reason if not self._stop.is_set() else STOPPED)

    def _tick(self) -> None:
        try:
            now = self._now()
            interval = self.settings.heartbeat_interval_s
            silent = now - self._last_rx
            if self._online and silent > interval * self.settings.missed_heartbeats:
                self._counters["missed_heartbeat_offline"] += 1
                self._go_offline(
                    f"missed {self.settings.missed_heartbeats} heartbeats ({silent:.2f} s silent)"
                )
            # silent towards the board for 2 intervals (a stalled controller: an overloaded
            # host, a stopped process): the board may have shown its fail-safe (all closed
            # after 3 intervals) and shows it until the next LIGHTS, so resend them
            stalled = now - self._last_tx > 2 * interval
            if now - self._last_hb_tx >= interval:
                self._last_hb_tx = now
                if self._online:
                    self._send(p.ControllerHeartbeat())
                else:
                    self._send_controller_hello()
            if stalled and self._online and self._lights is not None:
                self._counters["stall_lights"] += 1
                self._send_lights()
            since = self._lights_unacked_since
            if (
                self._online
                and since is not None
                and now - since >= interval * self.settings.missed_heartbeats
            ):
                # the board hears us (it sends) but acknowledges no lights: it has lost our
                # numbering (e.g. it missed our hello). A hello resynchronises it.
                self._counters["resync_hellos"] += 1
                self._log.warning("board.lights_unacknowledged", waited_s=round(now - since, 3))
                self._lights_unacked_since = now
                self._send_controller_hello()
            if (
                self._online
                and self._lights is not None
                and self._lights_seq is not None
                and now - self._lights_sent_at >= interval
            ):
                self._send_lights()
        except Exception:
            self._counters["internal_errors"] += 1
            self._log.exception("board.tick_failed")

    def _send(self, msg: p.Message) -> int:
        self._tx_seq = (self._tx_seq + 1) % p.SEQ_MOD
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(p.encode_message(msg, self._tx_seq))
            self._counters["frames_sent"] += 1
            self._last_tx = self._now()
        return self._tx_seq

    def _send_lights(self) -> None:
        assert self._lights is not None
        # never more codes than the board has seats (a smaller board is refused anyway)
        codes = self._lights[: self._board_seats] if self._board_seats else self._lights
        self._lights_seq = self._send(p.Lights(codes))
        self._lights_sent_at = self._now()
        if self._lights_unacked_since is None:
            self._lights_unacked_since = self._lights_sent_at
        self._counters["lights_sent"] += 1

    def _send_controller_hello(self) -> None:
        self._send(p.ControllerHello(heartbeat_ms=round(self.settings.heartbeat_interval_s * 1000)))
        self._counters["controller_hellos"] += 1

    def _emit(self, event: BoardEvent) -> None:
        self._events.put_nowait(event)

    def _go_offline(self, reason: str) -> None:
        self._online = False
        self._have_hello = False
        self._present = None
        self._counters["offline_events"] += 1
        # A stop asked for (the daemon's clean stop) is no fault: not a warning.
        say = self._log.info if reason == STOPPED else self._log.warning
        say("board.offline", board_id=self._board_id, reason=reason)
        self._emit(BoardOffline(reason=reason))

    def key_handled(self, event: KeyPressed) -> None:
        """The daemon has journaled (or refused) the presses up to ``event``: acknowledge them.

        Until then the board keeps them and retransmits them, so a daemon that dies between
        receiving a press and journaling it gets the press again (once) after its restart.
        """
        self._log.adopt_context()
        if event.board_id != self._board_id or event.boot_id != self._boot_id:
            return
        if event.key_seq > self._acked_key:
            self._acked_key = min(event.key_seq, self._last_key)
            if self._transport is not None:
                self._send(p.KeyAck(self._acked_key))
