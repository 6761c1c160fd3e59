"""Publishes the outbox and the meters to the broker, and keeps the table's status.

* Events leave only through the ledger's outbox (written in the same transaction as their
  ledger rows) and are acknowledged — removed from the outbox — only after the broker's
  PUBACK. A broker outage or a restart therefore loses none; a repeat carries the same
  ledger ``seq`` so a subscriber recognises it.
* Meter values are retained. A meter is published only when what a sign shows changes
  (its cents, display or state; not a new ``seq``/``ts`` alone), so repeats never spend
  the rate budget. The budget is a sliding window: at most ``meter_max_rate_hz`` messages
  in any second (one per ``1/rate`` s below 1 Hz), so a change after a quiet moment goes
  out at once and only a burst is coalesced; the latest value is always delivered, and
  every (re)connection republishes the meters. A meter goes out alongside the outbox's
  events, not after their acknowledgement.
* It rides on the table's one :class:`~progressived.mqtt.session.MqttSession` (shared with
  the link client): the session connects, notices a lost connection even while the table
  is idle, and reconnects; at every connection this publisher sends the online status and
  every meter again (a broker restarted empty has lost the retained ones).
* A publish the broker refuses (MQTT 5 PUBACK reason 0x80 and up: its ACL) is not
  acknowledged: the outbox row stays and is sent again every ``reconnect_max_s`` (the
  session counts and logs the refusal), as are a refused meter and status.
* The last will marks the table offline if the daemon dies; a clean stop publishes the
  same offline status itself before disconnecting. Every status carries this run's ``boot``
  id: a sign restarts its meter ``seq`` expectation when it sees a new one.
* Every status also carries the ledger's head (``head_seq``, ``head_hash``) as it was when
  the status was built: at each connection (the online status and the last will), at a
  clean stop, and every :data:`STATUS_REFRESH_S` while connected if the head has moved. A
  subscriber that records it holds a witness against a rewrite of the ledger's tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiomqtt
import structlog

from progressived.mqtt.payloads import Topics, dumps, status_payload
from progressived.mqtt.session import MqttSession

log = structlog.get_logger("progressived.mqtt")

# While connected, the online status is published again this often if the head has moved.
STATUS_REFRESH_S = 300.0

HeadSource = Callable[[], Awaitable[tuple[int, str] | None]]
"""The ledger's head (seq, hash), read consistently (on the ledger thread); None: unknown."""

# What a meter message says apart from what a sign shows: a change of these alone is a repeat.
_BOOKKEEPING_KEYS = frozenset({"seq", "ts"})


def shown(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a meter payload a sign shows (everything but ``seq`` and ``ts``)."""
    return {k: v for k, v in payload.items() if k not in _BOOKKEEPING_KEYS}


class RateWindow:
    """At most ``count`` sends in any ``window_s`` seconds (``count``/``window_s`` = the rate).

    Unlike a fixed gap after every send, a send after a quiet moment is never delayed:
    only the ``count + 1``-th send within one window waits.
    """

    def __init__(self, rate_hz: float) -> None:
        self.count = max(1, math.floor(rate_hz))
        self.window_s = self.count / rate_hz
        self._sent: deque[float] = deque(maxlen=self.count)

    def due(self) -> float:
        """The monotonic time from which the next send is allowed."""
        if len(self._sent) < self.count:
            return 0.0
        return self._sent[0] + self.window_s

    def sent(self, at: float) -> None:
        self._sent.append(at)


@dataclass(frozen=True, slots=True)
class PendingMessage:
    id: int
    topic: str
    payload: str
    qos: int
    retain: bool
    seq: int = 0  # the journal row the message describes


class Outbox(Protocol):
    """The ledger's outbox, reached from the event loop."""

    async def pending(self, limit: int) -> Sequence[PendingMessage]: ...

    async def ack(self, ids: Sequence[int]) -> None: ...

    async def ack_then_pending(
        self, ids: Sequence[int], limit: int
    ) -> Sequence[PendingMessage]:
        """``ack(ids)`` then ``pending(limit)`` in one call (one ledger-thread turn)."""
        ...


class PublisherHooks(Protocol):
    def published(self, topic: str, seq: int, first_seen: float | None) -> None: ...


class _NoHooks:
    def published(self, topic: str, seq: int, first_seen: float | None) -> None:
        return None


class SignPublisher:
    """Drains the outbox and keeps the retained meters and status current."""

    def __init__(
        self,
        session: MqttSession,
        topics: Topics,
        outbox: Outbox,
        *,
        meter_max_rate_hz: float = 4.0,
        version: str = "",
        clock: Callable[[], str] = lambda: "",
        hooks: PublisherHooks | None = None,
        head: HeadSource | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session = session
        self.topics = topics
        self.outbox = outbox
        self.meter_max_rate_hz = meter_max_rate_hz
        self.version = version
        self.clock = clock
        self.hooks = hooks or _NoHooks()
        self.boot = uuid.uuid4().hex  # one run of the daemon, announced in every status
        # A publish the broker refused is tried again after this long (the same pace as the
        # slowest reconnection: an ACL is fixed by hand, then the broker reloaded).
        self.refused_retry_s = session.options.reconnect_max_s
        self._wake = asyncio.Event()
        self._meters: dict[str, dict[str, Any]] = {}
        self._dirty: set[str] = set()
        self._windows: dict[str, RateWindow] = {}
        # The clock the meters' rate windows read (a test holds it still to judge the rate
        # by what is sent, never by how long the machine took).
        self._monotonic = monotonic
        self._first_seen: dict[str, float] = {}
        self._head_source = head
        self._status_head: tuple[int, str] | None = None  # in the last status published
        self._status_at = 0.0  # monotonic time of the last online status
        self._status_due = False  # the online status is still to be (re)sent
        self._held_until = 0.0  # after a refused publish: nothing is tried before this
        session.will = self._will
        session.on_connect(self._connected)
        session.while_connected(self._pump)

    @property
    def connected(self) -> bool:
        return self.session.connected

    @property
    def attempts(self) -> int:
        return self.session.attempts

    # ---------------------------------------------------------------- inputs
    def wake(self) -> None:
        """New rows are in the outbox."""
        self._wake.set()

    def set_meter(self, meter_id: str, payload: Mapping[str, Any]) -> bool:
        """The meter's latest value; published at most ``meter_max_rate_hz`` times a second.

        Ignored (returns False) when a sign would show the same: the same cents, display and
        state with only a newer ``seq``/``ts`` is a repeat, and a repeat must not spend the
        rate budget a real change needs.
        """
        previous = self._meters.get(meter_id)
        if previous is not None and shown(previous) == shown(payload):
            return False
        self._meters[meter_id] = dict(payload)
        self._dirty.add(meter_id)
        self._first_seen.setdefault(meter_id, time.perf_counter())
        self._wake.set()
        return True

    # ---------------------------------------------------------------- session callbacks
    async def _head(self) -> tuple[int, str] | None:
        return None if self._head_source is None else await self._head_source()

    def _status(self, *, online: bool, head: tuple[int, str] | None, ts: str = "") -> str:
        return dumps(
            status_payload(
                table_id=self.topics.table_id,
                online=online,
                ts=ts,
                version=self.version if online else "",
                boot=self.boot,
                head=head,
            )
        )

    async def _will(self) -> aiomqtt.Will:
        """The offline status, with the ledger's head at this connection."""
        payload = self._status(online=False, head=await self._head())
        return aiomqtt.Will(topic=self.topics.status, payload=payload, qos=1, retain=True)

    async def _connected(self) -> None:
        """Every (re)connection: the online status and every meter again."""
        self._held_until = 0.0
        self._status_due = True
        self._dirty.update(self._meters)
        await self._publish_online(await self._head())

    async def _publish_online(self, head: tuple[int, str] | None) -> None:
        accepted = await self.session.publish(
            self.topics.status, self._status(online=True, head=head, ts=self.clock()), retain=True
        )
        self._status_head, self._status_at = head, time.monotonic()
        self._status_due = not accepted
        if not accepted:
            self._hold()

    def _hold(self) -> None:
        self._held_until = time.monotonic() + self.refused_retry_s

    async def _refresh_status(self) -> None:
        """The online status again, with the new head, if it is due and the head moved."""
        if self._status_due:
            await self._publish_online(await self._head())
            return
        if self._head_source is None or time.monotonic() - self._status_at < STATUS_REFRESH_S:
            return
        self._status_at = time.monotonic()
        head = await self._head()
        if head is not None and head != self._status_head:
            await self._publish_online(head)

    # ---------------------------------------------------------------- loop
    async def _pump(self) -> None:
        while True:
            held = self._held_until - time.monotonic()
            if held > 0:  # the broker refused a publish: not before it is due again
                await asyncio.sleep(held)
                continue
            self._wake.clear()
            # Meters due now go out at once, alongside the events (not after their PUBACKs
            # and acknowledgement): a sign's meter does not wait for the outbox's bookkeeping.
            _, next_due, _ = await asyncio.gather(
                self._publish_events(),
                self._publish_meters(),
                self._refresh_status(),
            )
            wait = 1.0 if next_due is None else max(0.0, next_due - self._monotonic())
            if self._wake.is_set():
                continue
            # asyncio.timeout, not wait_for: no extra task, so a wake-up costs one loop turn
            # fewer on the way from a journal commit to the sign.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()

    async def _publish_events(self) -> None:
        """The outbox in ledger order; acknowledged only after the broker's PUBACK.

        A batch's acknowledgement goes with the next read (one ledger-thread turn, not two,
        so the next key press's commit waits behind one call fewer on that thread).
        """
        acked: Sequence[int] = ()
        while self._held_until <= time.monotonic():
            began = time.perf_counter()
            rows = await self.outbox.ack_then_pending(acked, 100)
            acked = ()
            if not rows:
                return
            read = time.perf_counter()
            # Sent in ledger order on one connection; the PUBACKs are awaited together.
            # If any fails, none is acknowledged: all are sent again after reconnecting,
            # with the same seq, which subscribers recognise.
            accepted = await asyncio.gather(
                *(
                    self.session.publish(row.topic, row.payload, qos=row.qos, retain=row.retain)
                    for row in rows
                )
            )
            # Only the rows before the first refused one are delivered in order; the rest
            # go again (a repeat carries the same seq).
            delivered = rows[: accepted.index(False)] if False in accepted else rows
            for row in delivered:
                self.hooks.published(row.topic, row.seq, None)
            acked = [row.id for row in delivered]
            if delivered:
                # The batch's spans, for the latency budget (bench/latency_budget.py).
                log.info(
                    "outbox sent",
                    seq=delivered[0].seq,
                    rows=len(delivered),
                    read_ms=round((read - began) * 1e3, 3),
                    puback_ms=round((time.perf_counter() - read) * 1e3, 3),
                )
            if len(delivered) < len(rows):
                self._hold()
        if acked:  # held after a refusal: what was delivered is acknowledged now
            await self.outbox.ack(acked)

    async def _publish_meters(self) -> float | None:
        """Every changed meter whose rate window allows it; returns when the next is due."""
        now = self._monotonic()
        next_due: float | None = None
        for meter_id in sorted(self._dirty):
            window = self._windows.setdefault(meter_id, RateWindow(self.meter_max_rate_hz))
            due = window.due()
            if due > now:
                next_due = due if next_due is None else min(next_due, due)
                continue
            payload = self._meters[meter_id]
            topic = self.topics.meter(meter_id)
            self._dirty.discard(meter_id)
            window.sent(now)
            try:
                accepted = await self.session.publish(topic, dumps(payload), retain=True)
            except BaseException:
                self._dirty.add(meter_id)  # sent again after reconnecting
                raise
            if not accepted:
                self._dirty.add(meter_id)
                self._hold()
                continue
            seq = int(payload.get("seq", 0))
            self.hooks.published(topic, seq, self._first_seen.pop(meter_id, None))
        return next_due

    async def _farewell(self) -> None:
        await self.session.publish(
            self.topics.status,
            self._status(online=False, head=await self._head(), ts=self.clock()),
            retain=True,
            timeout=2.0,
        )

    async def stop(self) -> None:
        """Publish the offline status (a clean stop sends no last will) and disconnect."""
        await self.session.stop(farewell=self._farewell)
