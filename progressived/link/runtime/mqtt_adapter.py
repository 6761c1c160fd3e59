"""The link controller's broker session: subscribe to the tables, publish in order.

* The connection is a :class:`~progressived.mqtt.session.MqttSession` (a fresh client per
  attempt, jittered backoff, a lost connection noticed while idle, MQTT 5). The user name
  is the link id unless ``[mqtt] username`` says otherwise, and the client id is the user
  name (docs/mqtt.md, "Accounts and client ids").
* It subscribes to ``<prefix>/link/<link>/from/+`` at QoS 1 and hands every message, with
  its receive time, to the controller's inbox; nothing is decided here.
* Publishing goes through one ordered queue of batches: a batch's messages are sent in
  order on one connection, their PUBACKs awaited together. A publish that fails while the
  broker is away, or that the broker refuses (its ACL; the session counts and logs it), is
  dropped: the tables send again from their outboxes and get the stored result, and every
  (re)connection republishes the retained meters (``on_connect``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

import aiomqtt
import structlog

from progressived.link.core.batch import Incoming, Outgoing
from progressived.mqtt.config import MqttSection
from progressived.mqtt.session import MqttSession
from progressived.mqtt.session_log import LoggedSession

log = structlog.get_logger("progressived.link.mqtt")

MAX_INFLIGHT = 1000  # publishes awaiting their PUBACK at once (a batch's replies)
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
        self.published = 0
        self.dropped = 0
        self._on_connect = on_connect
        self._clock_ms = clock_ms
        self._last_ms = 0
        self._outbox: asyncio.Queue[Sequence[Outgoing]] = asyncio.Queue()
        options = settings.broker_options(
            link_id,
            default_username=link_id,
            max_inflight=MAX_INFLIGHT,
            max_queued_incoming=INBOX_MAX,
        )
        self.session = MqttSession(options, observers=[LoggedSession("progressived.link.mqtt")])
        self.session.subscribe(self.subscription, self._received)
        self.session.on_connect(self._connected)

    @property
    def connected(self) -> bool:
        return self.session.connected

    @property
    def attempts(self) -> int:
        return self.session.attempts

    def send(self, messages: Sequence[Outgoing]) -> None:
        """Queue messages to publish, in order, after everything queued before them."""
        if messages:
            self._outbox.put_nowait(messages)

    async def _connected(self) -> None:
        if self._on_connect is not None:
            self._on_connect()

    async def run(self) -> None:
        """Connect, receive, publish, reconnect with backoff; returns only after stop()."""
        sender = asyncio.get_running_loop().create_task(self._publish_loop(), name="link-send")
        try:
            await self.session.run()
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender

    async def _received(self, message: aiomqtt.Message) -> None:
        payload = message.payload
        raw = payload if isinstance(payload, bytes) else str(payload).encode()
        # The receive time never goes backwards (a wall-clock step would otherwise
        # reorder the split window); it is journaled with each message.
        self._last_ms = max(self._last_ms, self._clock_ms())
        await self.inbox.put(Incoming(message.topic.value, raw, self._last_ms))

    async def _publish_loop(self) -> None:
        """Hand each batch to the client in order at once; PUBACKs are awaited in the
        background (at most ``MAX_INFLIGHT`` wait), so a slow PUBACK never holds the next
        batch back and the order on the connection is the order queued."""
        pending: set[asyncio.Task[None]] = set()
        while True:
            batch = await self._outbox.get()
            if not self.session.connected:
                self.dropped += len(batch)
                continue
            task = asyncio.get_running_loop().create_task(self._publish(batch))
            pending.add(task)
            task.add_done_callback(pending.discard)
            await asyncio.sleep(0)  # let it hand its messages to the client before the next

    async def _publish(self, batch: Sequence[Outgoing]) -> None:
        try:
            accepted = await asyncio.gather(
                *(self.session.publish(m.topic, m.payload, retain=m.retain) for m in batch)
            )
            self.published += sum(accepted)
            self.dropped += len(batch) - sum(accepted)
        except aiomqtt.MqttError as exc:
            self.dropped += len(batch)
            if not self.session.stopping:  # a clean stop says nothing of what it cut short
                log.warning("publish failed (the tables will ask again)", error=str(exc))

    async def drain(self, timeout: float) -> None:
        """Wait (at most ``timeout``) until the outbox is sent, e.g. before a clean stop."""
        deadline = time.monotonic() + timeout
        while not self._outbox.empty() and self.connected and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """No new connection; the current one is closed cleanly and :meth:`run` returns."""
        await self.session.stop()
