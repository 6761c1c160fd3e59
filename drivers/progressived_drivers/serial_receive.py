"""The serial driver's receive rules: what each frame from the board does to the link.

Why a module of its own: this is the controller's half of docs/protocol.md ("Sequence
numbers", "Hello", "Keys") -- which frames are dropped and counted, when the board counts
as online, rebooted or replaced, which key presses reach the daemon -- apart from
:mod:`progressived_drivers.serial_board`, which owns the port, reconnection, heartbeats and sending.
:class:`BoardReceiver` holds the link state both halves share; the driver subclasses it
and supplies the sending hooks.
"""

from __future__ import annotations

from progressived_drivers import protocol as p
from progressived_drivers.base import (
    BoardEvent,
    BoardOnline,
    KeyPressed,
    SensorsReported,
    SupervisorKey,
)
from progressived_drivers.board_settings import BoardSettings
from progressived_drivers.wire_log import DriverLog


class BoardReceiver:
    """The link state of one board and the rules that apply its frames to it."""

    settings: BoardSettings
    _counters: dict[str, int]
    _log: DriverLog
    _decoder: p.FrameDecoder
    _online: bool
    _have_hello: bool
    _board_id: str
    _boot_id: int
    _board_seats: int
    _table_size: int  # the highest seat the daemon gave set_lights (0: not yet told)
    _rx_seq: int
    _tx_seq: int
    _last_rx: float
    _last_key: int  # the last key press delivered to the daemon (this boot)
    _acked_key: int  # the last key press the daemon handled: acknowledged to the board
    _present: frozenset[int] | None
    _supervisor: bool
    _lights: tuple[p.LightCode, ...] | None
    _lights_seq: int | None  # unacknowledged lights frame
    _lights_unacked_since: float | None
    last_board_error: tuple[int, str] | None

    # ------------------------------------------------------------------ the driver's hooks

    def _now(self) -> float:
        raise NotImplementedError

    def _send(self, msg: p.Message) -> int:
        raise NotImplementedError

    def _send_lights(self) -> None:
        raise NotImplementedError

    def _send_controller_hello(self) -> None:
        raise NotImplementedError

    def _emit(self, event: BoardEvent) -> None:
        raise NotImplementedError

    def _go_offline(self, reason: str) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ receiving

    def _on_data(self, data: bytes) -> None:
        try:
            for frame in self._decoder.feed(data):
                self._on_frame(frame)
        except Exception:
            self._counters["internal_errors"] += 1
            self._log.exception("board.receive_failed")

    def _on_frame(self, frame: p.Frame) -> None:
        if frame.type & p.CONTROLLER_BIT:
            self._counters["wrong_direction"] += 1
            self._log.frame_error("wrong_direction", frame)
            return
        try:
            msg = p.decode_message(frame)
        except p.ProtocolError as exc:
            self._counters["bad_payload"] += 1
            self._log.frame_error("bad_payload", frame, error=str(exc))
            return
        if isinstance(msg, p.Hello):
            self._on_hello(frame, msg)
            return
        if not self._have_hello:
            self._counters["unexpected"] += 1
            return
        diff = p.seq_diff(frame.seq, self._rx_seq)
        if diff == 0:
            self._counters["duplicates"] += 1
            self._log.frame_error("duplicate", frame, expected_after=self._rx_seq)
            return
        if diff < 0:
            self._counters["reordered"] += 1
            self._log.frame_error("reordered", frame, expected_after=self._rx_seq)
            return
        if isinstance(msg, p.State) and (reason := self._invalid_state(msg)):
            self._counters["bad_payload"] += 1
            self._log.frame_error("bad_payload", frame, error=reason)
            return
        self._counters["gaps"] += diff - 1
        self._rx_seq = frame.seq
        self._last_rx = self._now()
        if isinstance(msg, p.Heartbeat):
            self._counters["heartbeats"] += 1
        elif isinstance(msg, p.State):
            self._on_state(frame, msg)
        elif isinstance(msg, p.Key):
            self._on_key(msg)
        elif isinstance(msg, p.Ack):
            self._counters["acks"] += 1
            if msg.seq == self._lights_seq:
                self._lights_seq = None
                self._lights_unacked_since = None
                self._counters["lights_acked"] += 1
        elif isinstance(msg, p.BoardErrorReport):
            self._counters["board_errors"] += 1
            self.last_board_error = (msg.code, msg.text)
            self._log.error(
                "board.error_report",
                board_id=self._board_id,
                code=msg.code,
                code_name=msg.code_name,
                text=msg.text,
            )
        else:  # a controller message type without the controller bit cannot happen
            self._counters["bad_payload"] += 1

    def _on_hello(self, frame: p.Frame, hello: p.Hello) -> None:
        """Every board HELLO resets the expectation to its ``seq`` (docs/protocol.md).

        A HELLO with a ``boot_id`` not seen before (a board that booted or rebooted) is
        answered with a C_HELLO numbered 1, so a board that drops everything before the
        controller's hello resynchronises at once. A same-boot HELLO is not answered: the
        board already had our hello this boot (answering it could ping-pong on a slow
        line); a board that lost our numbering anyway stops acknowledging LIGHTS, which
        makes :meth:`_tick` send a C_HELLO.
        """
        required = self._required_seats()
        if hello.seats < required:
            self._too_few_seats(hello, required)
            return
        now = self._now()
        same_boot = hello.board_id == self._board_id and hello.boot_id == self._boot_id
        self._counters["hellos"] += 1
        if not same_boot:
            if self._online:
                self._go_offline(
                    "board rebooted" if hello.board_id == self._board_id else "board replaced"
                )
            if self._board_id:
                self._counters["reboots"] += 1
            self._board_id, self._boot_id = hello.board_id, hello.boot_id
            self._last_key = self._acked_key = hello.key_base
        elif self._have_hello and p.seq_diff(frame.seq, self._rx_seq) <= 0:
            self._log.info(
                "board.hello_resets_sequence",
                board_id=hello.board_id,
                seq=frame.seq,
                previous=self._rx_seq,
            )
        self._board_seats = hello.seats
        self._rx_seq = frame.seq
        self._last_rx = now
        self._have_hello = True
        if not self._online:
            self._online = True
            self._present = None
            self._counters["online_events"] += 1
            self._log.info("board.online", board_id=hello.board_id, boot_id=f"{hello.boot_id:08x}")
            self._emit(BoardOnline(board_id=hello.board_id, protocol_version=frame.version))
        if not same_boot:
            self._tx_seq = 0  # our numbering restarts with the hello to a new boot
            self._send_controller_hello()
        self._send(p.KeyAck(self._acked_key))
        if self._lights is not None:
            self._send_lights()

    def _too_few_seats(self, hello: p.Hello, required: int) -> None:
        """Every seat of the table needs a sensor and a light: a smaller board would leave
        seats that can never see a wager. Refused until a bigger board answers."""
        self._counters["too_few_seats"] += 1
        self._log.repeated(
            "error",
            "board.too_few_seats",
            board_id=hello.board_id,
            board_seats=hello.seats,
            seats=required,
        )
        if self._online:  # replaced by a smaller board: its frames are not the old one's
            self._go_offline(f"board has {hello.seats} seats, the table {required}")
        self._have_hello = False

    def _table_seats(self) -> int:
        """The table's seats: those the daemon lights, else ``[board] seats``, else the board's."""
        return self._table_size or self.settings.seats or self._board_seats

    def _required_seats(self) -> int:
        """The fewest seats a board may have: the table's and ``[board] seats`` (0: unknown)."""
        return max(self._table_size, self.settings.seats or 0)

    def _invalid_state(self, state: p.State) -> str:
        """Why a STATE cannot be applied ('' when it can)."""
        if state.seats != self._board_seats:
            return f"STATE has {state.seats} seats, the board's HELLO {self._board_seats}"
        return ""

    def _on_state(self, frame: p.Frame, state: p.State) -> None:
        self._counters["states"] += 1
        limit = self._table_seats()
        present = frozenset(seat for seat in state.present if seat <= limit)
        if stray := sorted(state.present - present):
            # a sensor beyond the table (a stray object, a stuck sensor on an unused seat):
            # the table's own seats are applied, so it cannot freeze the table's wagers
            self._counters["wagers_beyond_table"] += 1
            self._log.repeated(
                "warning",
                "board.wager_beyond_table",
                board_id=self._board_id,
                seats=stray,
                table_seats=limit,
            )
        if present != self._present:
            self._present = present
            self._emit(SensorsReported(present=present, board_seq=frame.seq))
        if state.supervisor != self._supervisor:
            self._supervisor = state.supervisor
            self._emit(SupervisorKey(on=state.supervisor))

    def _on_key(self, key: p.Key) -> None:
        if key.key_seq <= self._last_key:
            self._counters["duplicate_keys"] += 1
        elif key.key_seq > self._last_key + 1:
            self._counters["keys_out_of_order"] += 1
        else:
            self._last_key = key.key_seq
            self._counters["keys"] += 1
            self._emit(
                KeyPressed(
                    code=key.code,
                    key_seq=key.key_seq,
                    board_id=self._board_id,
                    boot_id=self._boot_id,
                    idempotency_key=f"{self._board_id}:{self._boot_id:08x}:{key.key_seq}",
                )
            )
        self._send(p.KeyAck(self._acked_key))
