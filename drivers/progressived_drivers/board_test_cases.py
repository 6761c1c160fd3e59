"""The conformance cases of ``progressivectl board-test``, each judged by what the board sends.

The tester plays the controller on the board's serial line and runs the cases listed in
docs/protocol.md ("Conformance test"), in order, each judged only by what the board sends
back: hellos, heartbeats, frame numbering, acknowledgements, key retransmission. Two cases
need a person at the board (press a key, reboot it); the tester asks through ``act`` and
waits up to ``action_timeout_s``. Running them and reporting is ``board_test``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from progressived_drivers import protocol as p
from progressived_drivers.board_link import BoardLink, Received

#: ``act(instruction, simulator_command)``: ask for a manual action at the board.
Act = Callable[[str, str], Awaitable[None] | None]

M = TypeVar("M")

#: The board's heartbeat interval until a controller hello sets one (docs/protocol.md).
BOARD_DEFAULT_INTERVAL_S = 1.0
#: At most this many HEARTBEATs between two STATEs (docs/protocol.md, STATE).
STATE_EVERY_HEARTBEATS = 5


class CaseFailed(AssertionError):
    """One check of a case did not hold (its message is the report's detail)."""


def check(condition: bool, detail: str) -> None:
    if not condition:
        raise CaseFailed(detail)


def need(item: Received | None, kind: type[M], detail: str) -> M:
    """The message of ``item`` if it is a ``kind``; else the case fails with ``detail``."""
    if item is None or not isinstance(item.msg, kind):
        raise CaseFailed(detail)
    return item.msg


def _is(kind: type) -> Callable[[Received], bool]:
    return lambda r: isinstance(r.msg, kind)


class BoardCases:
    """The conformance cases against the board on ``link``, in ``CASES`` order."""

    def __init__(
        self,
        link: BoardLink,
        *,
        act: Act | None = None,
        heartbeat_ms: int = 200,
        action_timeout_s: float = 60.0,
    ) -> None:
        self.link = link
        self.act = act
        self.interval = heartbeat_ms / 1000
        self.heartbeat_ms = heartbeat_ms
        self.action_timeout_s = action_timeout_s
        self.hello: p.Hello | None = None
        self.board: dict[str, Any] = {}  # what the board's HELLO says of it
        self._beating = False
        self._after_hello = 0  # the position in the record just after the last hello's STATE

    # ------------------------------------------------------------------ helpers

    @property
    def reply_s(self) -> float:
        """How long a board may take to answer: one interval and a margin for the line."""
        return self.interval + 0.5

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if self._beating:
                self.link.send(p.ControllerHeartbeat())

    async def _ask(self, instruction: str, sim_command: str) -> None:
        if self.act is None:
            raise CaseFailed(f"needs a person at the board: {instruction}")
        result = self.act(instruction, sim_command)
        if result is not None:
            await result

    async def _hello(self, seq: int | None = None) -> p.Hello:
        """Our C_HELLO; the board must answer HELLO then STATE."""
        mark = self.link.mark()
        self.link.send(p.ControllerHello(self.heartbeat_ms), seq)
        hello = need(
            await self.link.wait_for(_is(p.Hello), self.reply_s, mark),
            p.Hello,
            "no HELLO in answer to the controller's hello",
        )
        state_item = await self.link.wait_for(_is(p.State), self.reply_s, mark)
        state = need(state_item, p.State, "no STATE after the HELLO")
        received = self.link.received
        self._after_hello = next(
            i + 1 for i in range(mark, len(received)) if received[i] is state_item
        )
        check(state.seats == hello.seats, f"STATE has {state.seats} seats, HELLO {hello.seats}")
        return hello

    def _lights(self, shift: int = 0) -> p.Lights:
        seats = self.hello.seats if self.hello else 1
        return p.Lights(tuple(p.LightCode((i + shift) % 4) for i in range(seats)))

    async def _lights_acked(self, seq: int | None = None, shift: int = 0) -> int:
        mark = self.link.mark()
        sent = self.link.send(self._lights(shift), seq)
        check(await self.link.ack_of(sent, self.reply_s, mark), f"LIGHTS seq {sent} not acked")
        return sent

    async def _not_acked(self, seq: int, what: str, mark: int) -> None:
        acked = await self.link.ack_of(seq, 3 * self.interval, mark)
        check(not acked, f"{what} was acknowledged (must be dropped)")

    # ------------------------------------------------------------------ cases

    async def case_heartbeat_before_hello(self) -> str:
        got = await self.link.wait_for(_is(p.Heartbeat), 2.5 * BOARD_DEFAULT_INTERVAL_S, after=0)
        check(got is not None, "no HEARTBEAT before the controller's hello (default 1 s)")
        return "board heartbeats before any controller frame"

    async def case_hello(self) -> str:
        hello = await self._hello()
        self.hello = hello
        self.board = {
            "board_id": hello.board_id,
            "boot_id": f"{hello.boot_id:08x}",
            "seats": hello.seats,
            "key_base": hello.key_base,
        }
        self._beating = True
        return f"HELLO {hello.board_id} seats={hello.seats}, then STATE"

    async def case_heartbeats(self) -> str:
        # the interval of our hello applies from the board's next heartbeat on
        first = await self.link.wait_for(_is(p.Heartbeat), 2.5 * BOARD_DEFAULT_INTERVAL_S)
        check(first is not None, "no HEARTBEAT after the controller's hello")
        mark = self.link.mark()
        await asyncio.sleep(10 * self.interval)
        beats = [r for r in self.link.received[mark:] if isinstance(r.msg, p.Heartbeat)]
        check(7 <= len(beats) <= 13, f"{len(beats)} heartbeats in 10 intervals (want 7..13)")
        return f"{len(beats)} heartbeats in 10 intervals of {self.heartbeat_ms} ms"

    async def case_periodic_state(self) -> str:
        # nothing changes at the board: STATE still comes at least every 5 HEARTBEATs
        mark = self.link.mark()
        await asyncio.sleep(16 * self.interval)
        window = [r for r in self.link.received[mark:] if isinstance(r.msg, (p.Heartbeat, p.State))]
        states = [i for i, r in enumerate(window) if isinstance(r.msg, p.State)]
        check(len(states) >= 2, f"{len(states)} STATE in 16 idle intervals (want one per 5 beats)")
        gaps = [b - a - 1 for a, b in itertools.pairwise(states)]
        check(
            max(gaps) <= STATE_EVERY_HEARTBEATS,
            f"{max(gaps)} HEARTBEATs between two STATEs (want at most {STATE_EVERY_HEARTBEATS})",
        )
        return f"{len(states)} periodic STATEs in 16 intervals, at most {max(gaps)} beats apart"

    async def case_lights(self) -> str:
        await self._lights_acked()
        await self._lights_acked(shift=1)
        # fewer lights than seats is valid (the rest show idle)
        mark = self.link.mark()
        sent = self.link.send(p.Lights((p.LightCode.BET,)))
        check(await self.link.ack_of(sent, self.reply_s, mark), "LIGHTS for 1 seat not acked")
        return "each LIGHTS acknowledged by ACK(seq)"

    async def case_lights_bad_payload(self) -> str:
        seats = self.hello.seats if self.hello else 1
        mark = self.link.mark()
        lights = p.MsgType.C_LIGHTS
        wrong_count = self.link.send_raw_payload(lights, bytes([seats + 1]) + bytes(seats))
        unknown = self.link.send_raw_payload(lights, bytes([seats]) + b"\x09" * seats)
        await self._not_acked(wrong_count, "a LIGHTS whose count does not match", mark)
        await self._not_acked(unknown, "a LIGHTS with light code 9", mark)
        await self._lights_acked()
        return "LIGHTS with a wrong count or an unknown code dropped"

    async def case_stale_lights(self) -> str:
        last = await self._lights_acked()
        mark = self.link.mark()
        self.link.send(self._lights(2), seq=last)  # a replay
        self.link.send(self._lights(3), seq=(last - 5) % p.SEQ_MOD)  # an older one
        await self._not_acked(last, "a duplicate LIGHTS (same seq)", mark)
        await self._not_acked((last - 5) % p.SEQ_MOD, "an older LIGHTS", mark)
        await self._lights_acked()
        return "duplicate and older LIGHTS dropped, the next one acknowledged"

    async def case_sequence_wrap(self) -> str:
        self.link.tx_seq = p.SEQ_MOD - 4  # our hello is 65533, then LIGHTS 65534 65535 0 1
        await self._hello()
        seqs = [await self._lights_acked(shift=i) for i in range(4)]
        check(seqs[-1] < seqs[0], f"did not wrap: {seqs}")
        return f"LIGHTS {' '.join(map(str, seqs))} acknowledged across the wrap"

    async def case_hello_resets_sequence(self) -> str:
        self.link.tx_seq = 30000
        await self._hello()
        await self._lights_acked()
        self.link.tx_seq = 4
        await self._hello()  # seq 5: lower than the board's expectation
        await self._lights_acked()
        return "a controller hello with a lower seq resets the board's expectation"

    async def case_malformed_to_board(self) -> str:
        seats = self.hello.seats if self.hello else 1
        payload = bytes([seats]) + bytes(seats)
        link = self.link
        mark = link.mark()
        bad: dict[str, int] = {}
        body = bytearray(p.encode_body(p.MsgType.C_LIGHTS, link.tx_seq + 1, payload))
        body[-1] ^= 0x5A
        link.write(b"\x00" + p.cobs_encode(bytes(body)) + b"\x00")
        bad["bad CRC"] = link.tx_seq + 1
        link.tx_seq += 2
        truncated = p.encode_body(p.MsgType.C_LIGHTS, link.tx_seq, payload)[:6]
        link.write(b"\x00" + p.cobs_encode(truncated) + b"\x00")
        link.write(b"\x00" + b"\x5a" * 200 + b"\x00")  # oversized
        link.tx_seq += 1
        link.write(p.encode_frame(p.MsgType.C_LIGHTS, link.tx_seq, payload, version=2))
        bad["version 2"] = link.tx_seq
        link.tx_seq += 1
        link.write(p.encode_frame(p.MsgType.ACK, link.tx_seq, b"\x00\x01"))  # board's own type
        bad["wrong direction"] = link.tx_seq
        link.tx_seq += 1
        link.write(p.encode_frame(0x8F, link.tx_seq, b""))  # unknown controller type
        bad["unknown type"] = link.tx_seq
        link.write(b"\x13\x37\xff\x01")  # garbage, then a good frame: its delimiter resyncs
        good = link.send(self._lights())
        check(await link.ack_of(good, self.reply_s, mark), "lost sync: good LIGHTS not acked")
        for what, seq in bad.items():
            check(
                not any(
                    isinstance(r.msg, p.Ack) and r.msg.seq == seq for r in link.received[mark:]
                ),
                f"acknowledged a frame with {what}",
            )
        return "bad CRC, truncated, oversized, version 2, wrong direction, garbage: dropped"

    async def case_key_retransmission(self) -> str:
        mark = self.link.mark()
        await self._ask("press any key on the keypad (it is not acted on)", "key S1")
        first = need(
            await self.link.wait_for(_is(p.Key), self.action_timeout_s, mark),
            p.Key,
            "no KEY frame after the key press",
        )
        base = self.hello.key_base if self.hello else 0
        check(first.key_seq > base, f"key_seq {first.key_seq} not above key_base {base}")
        again = await self.link.wait_for(
            lambda r: isinstance(r.msg, p.Key) and r.msg == first, 2 * self.interval + 0.5
        )
        check(again is not None, "an unacknowledged KEY was not retransmitted")
        await self._hello()
        # after our hello the board resends its unacknowledged presses right after HELLO and
        # STATE, before its next HEARTBEAT (a retransmission on the beat does not count)
        after = await self.link.wait_for(
            lambda r: isinstance(r.msg, (p.Key, p.Heartbeat)), self.reply_s, self._after_hello
        )
        check(
            after is not None and isinstance(after.msg, p.Key) and after.msg == first,
            "unacknowledged KEY not resent right after the HELLO and STATE answering a C_HELLO",
        )
        self.link.send(p.KeyAck(first.key_seq))
        await asyncio.sleep(self.interval)  # in flight
        mark = self.link.mark()
        await asyncio.sleep(3 * self.interval)
        late = [
            r
            for r in self.link.received[mark:]
            if isinstance(r.msg, p.Key) and r.msg.key_seq <= first.key_seq
        ]
        check(not late, f"KEY {first.key_seq} still sent after KEY_ACK")
        return f"KEY {first.key_seq} {first.code!r} retransmitted until KEY_ACK"

    async def case_reboot(self) -> str:
        old = self.hello
        mark = self.link.mark()
        self._beating = False
        await self._ask("reboot the board (reset or power-cycle it)", "reboot")
        got = await self.link.wait_for(
            lambda r: isinstance(r.msg, p.Hello) and (old is None or r.msg.boot_id != old.boot_id),
            self.action_timeout_s,
            mark,
        )
        hello = need(got, p.Hello, "no HELLO with a new boot_id after the reboot")
        assert got is not None
        check(got.frame.seq == 1, f"first frame after boot has seq {got.frame.seq}, want 1")
        check(hello.key_base == 0, f"key_base {hello.key_base} after boot, want 0")
        # before our hello the board must drop everything else
        mark = self.link.mark()
        early = self.link.send(self._lights())
        await self._not_acked(early, "a LIGHTS before the controller's hello", mark)
        self.link.tx_seq = 0  # our numbering restarts at 1 with the hello to a new boot
        self.hello = await self._hello()
        self._beating = True
        await self._lights_acked()
        return "new boot_id, seq 1, key_base 0; resynchronised by the controller's hello"

    def case_board_frames(self) -> str:
        """Every frame the board sent was well formed and numbered one more than the last."""
        link = self.link
        rejected = [f"{kind} {chunk[:12].hex()}" for kind, chunk in link.rejected]
        check(not rejected, f"board sent malformed frames: {', '.join(rejected[:3])}")
        wrong = [r for r in link.received if r.frame.type & p.CONTROLLER_BIT]
        check(not wrong, f"board sent {len(wrong)} frames with the controller bit set")
        bad = [r for r in link.received if r.msg is None]
        check(not bad, f"bad payload: type 0x{bad[0].frame.type:02x} {bad[0].error}" if bad else "")
        previous: Received | None = None
        boot: int | None = None
        for item in link.received:
            new_boot = isinstance(item.msg, p.Hello) and item.msg.boot_id != boot
            if isinstance(item.msg, p.Hello):
                boot = item.msg.boot_id
            if previous is not None and not new_boot:
                step = p.seq_diff(item.frame.seq, previous.frame.seq)
                check(step == 1, f"board seq {previous.frame.seq} then {item.frame.seq} (want +1)")
            previous = item
        return f"{len(link.received)} board frames, all well formed and numbered in order"

    #: The cases in the order they run (docs/protocol.md, "Conformance test").
    CASES = (
        "heartbeat_before_hello",
        "hello",
        "heartbeats",
        "periodic_state",
        "lights",
        "lights_bad_payload",
        "stale_lights",
        "sequence_wrap",
        "hello_resets_sequence",
        "malformed_to_board",
        "key_retransmission",
        "reboot",
        "board_frames",
    )
