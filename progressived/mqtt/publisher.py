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
* Each connection attempt uses a fresh ``aiomqtt.Client``: reusing one after a disconnect
  can report "connected" before the broker has acknowledged. Attempts back off
  exponentially up to ``reconnect_max_s``.
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
import ssl
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiomqtt
import structlog

from progressived.mqtt.config import NO_DELAY, MqttSection
from progressived.mqtt.payloads import Topics, dumps, status_payload

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


class PublisherHooks(Protocol):
    def broker_up(self, up: bool) -> None: ...

    def published(self, topic: str, seq: int, first_seen: float | None) -> None: ...


class _NoHooks:
    def broker_up(self, up: bool) -> None:
        return None

    def published(self, topic: str, seq: int, first_seen: float | None) -> None:
        return None


class SignPublisher:
    """Drains the outbox and keeps the retained meters and status current."""

    def __init__(
        self,
        settings: MqttSection,
        topics: Topics,
        outbox: Outbox,
        *,
        version: str = "",
        clock: Callable[[], str] = lambda: "",
        hooks: PublisherHooks | None = None,
        head: HeadSource | None = None,
    ) -> None:
        self.settings = settings
        self.topics = topics
        self.outbox = outbox
        self.version = version
        self.clock = clock
        self.hooks = hooks or _NoHooks()
        self.boot = uuid.uuid4().hex  # one run of the daemon, announced in every status
        self.connected = False
        self.attempts = 0
        self._wake = asyncio.Event()
        self._meters: dict[str, dict[str, Any]] = {}
        self._dirty: set[str] = set()
        self._windows: dict[str, RateWindow] = {}
        self._first_seen: dict[str, float] = {}
        self._stopping = False
        self._stop_event = asyncio.Event()
        self._client: aiomqtt.Client | None = None
        self._head_source = head
        self._status_head: tuple[int, str] | None = None  # in the last status published
        self._status_at = 0.0  # monotonic time of the last online status

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

    # ---------------------------------------------------------------- loop
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

    async def _publish_online(
        self, client: aiomqtt.Client, timeout: float | None, head: tuple[int, str] | None
    ) -> None:
        await client.publish(
            self.topics.status,
            self._status(online=True, head=head, ts=self.clock()),
            qos=1,
            retain=True,
            timeout=timeout,
        )
        self._status_head, self._status_at = head, time.monotonic()

    async def _refresh_status(self, client: aiomqtt.Client, timeout: float) -> None:
        """The online status again, with the new head, if it is due and the head moved."""
        if self._head_source is None or time.monotonic() - self._status_at < STATUS_REFRESH_S:
            return
        self._status_at = time.monotonic()
        head = await self._head()
        if head is not None and head != self._status_head:
            await self._publish_online(client, timeout, head)

    def _client_for_attempt(self, head: tuple[int, str] | None = None) -> aiomqtt.Client:
        s = self.settings
        tls_params = None
        tls_insecure = None
        if s.tls is not None:
            tls_params = aiomqtt.TLSParameters(
                ca_certs=str(s.tls.ca_certs) if s.tls.ca_certs else None,
                certfile=str(s.tls.certfile) if s.tls.certfile else None,
                keyfile=str(s.tls.keyfile) if s.tls.keyfile else None,
                cert_reqs=ssl.CERT_REQUIRED,
            )
            tls_insecure = s.tls.insecure
        will = aiomqtt.Will(
            topic=self.topics.status,
            payload=self._status(online=False, head=head),
            qos=1,
            retain=True,
        )
        return aiomqtt.Client(
            hostname=s.host,
            port=s.port,
            identifier=s.client_id or f"progressived-{self.topics.table_id}",
            username=s.username,
            password=s.resolved_password(),
            will=will,
            keepalive=s.keepalive_s,
            tls_params=tls_params,
            tls_insecure=tls_insecure,
            timeout=s.publish_timeout_s,
            socket_options=NO_DELAY,
        )

    async def run(self) -> None:
        """Connect, publish, reconnect with backoff; returns only after :meth:`stop`."""
        delay = self.settings.reconnect_initial_s
        while not self._stopping:
            self.attempts += 1
            client = self._client_for_attempt(await self._head())
            try:
                async with client:
                    self._client = client
                    self._set_connected(True)
                    delay = self.settings.reconnect_initial_s
                    await self._publish_online(client, None, await self._head())
                    self._dirty.update(self._meters)
                    await self._pump(client)
            except aiomqtt.MqttError as exc:
                if not self._stopping:
                    log.warning("broker unreachable", error=str(exc), retry_in_s=round(delay, 2))
            finally:
                self._client = None
                self._set_connected(False)
            if self._stopping:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop_event.wait(), timeout=delay)
            delay = min(self.settings.reconnect_max_s, delay * 2)

    def _set_connected(self, up: bool) -> None:
        if up != self.connected:
            self.connected = up
            self.hooks.broker_up(up)
            log.info("broker connected" if up else "broker disconnected")

    async def _pump(self, client: aiomqtt.Client) -> None:
        timeout = self.settings.publish_timeout_s
        while not self._stopping:
            self._wake.clear()
            # Meters due now go out at once, alongside the events (not after their PUBACKs
            # and acknowledgement): a sign's meter does not wait for the outbox's bookkeeping.
            _, next_due, _ = await asyncio.gather(
                self._publish_events(client, timeout),
                self._publish_meters(client, timeout),
                self._refresh_status(client, timeout),
            )
            wait = 1.0 if next_due is None else max(0.0, next_due - time.monotonic())
            if self._wake.is_set():
                continue
            # asyncio.timeout, not wait_for: no extra task, so a wake-up costs one loop turn
            # fewer on the way from a journal commit to the sign.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()

    async def _publish_events(self, client: aiomqtt.Client, timeout: float) -> None:
        """The outbox in ledger order; acknowledged only after the broker's PUBACK."""
        while rows := await self.outbox.pending(100):
            # Sent in ledger order on one connection; the PUBACKs are awaited together.
            # If any fails, none is acknowledged: all are sent again after reconnecting,
            # with the same seq, which subscribers recognise.
            await asyncio.gather(
                *(
                    client.publish(
                        row.topic, row.payload, qos=row.qos, retain=row.retain, timeout=timeout
                    )
                    for row in rows
                )
            )
            for row in rows:
                self.hooks.published(row.topic, row.seq, None)
            await self.outbox.ack([row.id for row in rows])

    async def _publish_meters(self, client: aiomqtt.Client, timeout: float) -> float | None:
        """Every changed meter whose rate window allows it; returns when the next is due."""
        now = time.monotonic()
        next_due: float | None = None
        for meter_id in sorted(self._dirty):
            window = self._windows.setdefault(meter_id, RateWindow(self.settings.meter_max_rate_hz))
            due = window.due()
            if due > now:
                next_due = due if next_due is None else min(next_due, due)
                continue
            payload = self._meters[meter_id]
            topic = self.topics.meter(meter_id)
            self._dirty.discard(meter_id)
            window.sent(now)
            try:
                await client.publish(topic, dumps(payload), qos=1, retain=True, timeout=timeout)
            except BaseException:
                self._dirty.add(meter_id)  # sent again after reconnecting
                raise
            seq = int(payload.get("seq", 0))
            self.hooks.published(topic, seq, self._first_seen.pop(meter_id, None))
        return next_due

    async def stop(self) -> None:
        """Publish the offline status (a clean stop sends no last will) and disconnect."""
        client = self._client
        if client is not None and self.connected:
            try:
                await client.publish(
                    self.topics.status,
                    self._status(online=False, head=await self._head(), ts=self.clock()),
                    qos=1,
                    retain=True,
                    timeout=2.0,
                )
            except aiomqtt.MqttError as exc:
                log.warning("could not publish offline status", error=str(exc))
        self._stopping = True
        self._stop_event.set()
        self._wake.set()
