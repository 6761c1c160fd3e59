"""The link controller's broker connection: subscribe to the tables, publish in order.

* Each connection attempt uses a fresh ``aiomqtt.Client`` (reusing one after a disconnect
  can report "connected" before the broker acknowledged); attempts back off exponentially
  from ``reconnect_initial_s`` to ``reconnect_max_s``. The user name is the link id unless
  ``[mqtt] username`` says otherwise.
* It subscribes to ``<prefix>/link/<link>/from/+`` at QoS 1 and hands every message, with
  its receive time, to the controller's inbox; nothing is decided here.
* Publishing goes through one ordered queue of batches: a batch's messages are sent in
  order on one connection, their PUBACKs awaited together. A publish that fails while the
  broker is away is dropped: the tables send again from their outboxes and get the stored
  result, and every (re)connection republishes the retained meters (``on_connect``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Callable, Sequence

import aiomqtt
import structlog

from progressived.link.core.batch import Incoming, Outgoing
from progressived.mqtt.config import NO_DELAY, MqttSection

log = structlog.get_logger("progressived.link.mqtt")

PENDING_CALLS_WARN = 100_000  # publishes awaiting PUBACK before aiomqtt logs a warning
INBOX_MAX = 200_000  # messages waiting for the book; the broker holds back beyond this


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class LinkMqtt:
    """One link's broker session (reconnecting) with an inbox and an ordered outbox."""

    def __init__(
        self,
        settings: MqttSection,
        link_id: str,
        *,
        on_connect: Callable[[], None] | None = None,
        clock_ms: Callable[[], int] = now_ms,
    ) -> None:
        self.settings = settings
        self.link_id = link_id
        self.subscription = f"{settings.prefix}/link/{link_id}/from/+"
        self.inbox: asyncio.Queue[Incoming] = asyncio.Queue(INBOX_MAX)
        self.connected = False
        self.attempts = 0
        self.published = 0
        self.dropped = 0
        self._on_connect = on_connect
        self._clock_ms = clock_ms
        self._last_ms = 0
        self._outbox: asyncio.Queue[Sequence[Outgoing]] = asyncio.Queue()
        self._client: aiomqtt.Client | None = None
        self._stopping = False
        self._stop_event = asyncio.Event()

    def send(self, messages: Sequence[Outgoing]) -> None:
        """Queue messages to publish, in order, after everything queued before them."""
        if messages:
            self._outbox.put_nowait(messages)

    def _client_for_attempt(self) -> aiomqtt.Client:
        s = self.settings
        tls_params = None
        if s.tls is not None:
            tls_params = aiomqtt.TLSParameters(
                ca_certs=str(s.tls.ca_certs) if s.tls.ca_certs else None,
                certfile=str(s.tls.certfile) if s.tls.certfile else None,
                keyfile=str(s.tls.keyfile) if s.tls.keyfile else None,
                cert_reqs=ssl.CERT_REQUIRED,
            )
        return aiomqtt.Client(
            hostname=s.host,
            port=s.port,
            identifier=s.client_id or f"progressived-link-{self.link_id}",
            username=s.username or self.link_id,
            password=s.resolved_password(),
            keepalive=s.keepalive_s,
            tls_params=tls_params,
            tls_insecure=s.tls.insecure if s.tls is not None else None,
            timeout=s.publish_timeout_s,
            max_inflight_messages=1000,
            max_queued_incoming_messages=INBOX_MAX,
            socket_options=NO_DELAY,
        )

    async def run(self) -> None:
        """Connect, receive, publish, reconnect with backoff; returns only after stop()."""
        delay = self.settings.reconnect_initial_s
        sender = asyncio.get_running_loop().create_task(self._publish_loop(), name="link-send")
        try:
            while not self._stopping:
                self.attempts += 1
                client = self._client_for_attempt()
                # aiomqtt warns once per publish beyond 10 awaiting their PUBACK; the link
                # has a batch's replies in flight by design (a log line per reply, 17,000 in
                # 20 s under 50 tables, cost a third of its CPU). The inflight window is
                # max_inflight_messages; the outbox depth is a metric.
                client.pending_calls_threshold = PENDING_CALLS_WARN
                try:
                    async with client:
                        await client.subscribe(self.subscription, qos=1)
                        self._client = client
                        self._set_connected(True)
                        delay = self.settings.reconnect_initial_s
                        if self._on_connect is not None:
                            self._on_connect()
                        await self._receive(client)
                except aiomqtt.MqttError as exc:
                    if not self._stopping:
                        log.warning("broker unreachable", error=str(exc), retry_in_s=delay)
                finally:
                    self._client = None
                    self._set_connected(False)
                if self._stopping:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop_event.wait(), timeout=delay)
                delay = min(self.settings.reconnect_max_s, delay * 2)
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender

    async def _receive(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            payload = message.payload
            raw = payload if isinstance(payload, bytes) else str(payload).encode()
            # The receive time never goes backwards (a wall-clock step would otherwise
            # reorder the split window); it is journaled with each message.
            self._last_ms = max(self._last_ms, self._clock_ms())
            await self.inbox.put(Incoming(message.topic.value, raw, self._last_ms))

    async def _publish_loop(self) -> None:
        """Hand each batch to the client in order at once; PUBACKs are awaited in the
        background (at most ``max_inflight_messages`` wait), so a slow PUBACK never holds
        the next batch back and the order on the connection is the order queued."""
        pending: set[asyncio.Task[None]] = set()
        while True:
            batch = await self._outbox.get()
            client = self._client
            if client is None:
                self.dropped += len(batch)
                continue
            task = asyncio.get_running_loop().create_task(self._publish(client, batch))
            pending.add(task)
            task.add_done_callback(pending.discard)
            await asyncio.sleep(0)  # let it hand its messages to the client before the next

    async def _publish(self, client: aiomqtt.Client, batch: Sequence[Outgoing]) -> None:
        timeout = self.settings.publish_timeout_s
        try:
            await asyncio.gather(
                *(
                    client.publish(m.topic, m.payload, qos=1, retain=m.retain, timeout=timeout)
                    for m in batch
                )
            )
            self.published += len(batch)
        except aiomqtt.MqttError as exc:
            self.dropped += len(batch)
            log.warning("publish failed (the tables will ask again)", error=str(exc))

    async def drain(self, timeout: float) -> None:
        """Wait (at most ``timeout``) until the outbox is sent, e.g. before a clean stop."""
        deadline = time.monotonic() + timeout
        while not self._outbox.empty() and self.connected and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    def _set_connected(self, up: bool) -> None:
        if up != self.connected:
            self.connected = up
            log.info("broker connected" if up else "broker disconnected")

    def stop(self) -> None:
        """No new connection; the caller cancels :meth:`run` to leave the current one."""
        self._stopping = True
        self._stop_event.set()
