"""The link controller's broker sessions: subscribe to the tables, publish in order.

* One :class:`~progressived.mqtt.session.MqttSession` per broker of ``[mqtt] hosts`` (or the
  one ``host``): a fresh client per attempt, jittered backoff, a lost connection noticed
  while idle, MQTT 5. The user name is the link id unless ``[mqtt] username`` says
  otherwise, and the client id is the user name (docs/mqtt.md, "Accounts and client ids").
* Each session subscribes to ``<prefix>/link/<link>/from/+`` at QoS 1 and files every
  message, with its receive time, in the :class:`~progressived.link.runtime.inbox.FairInbox`
  (one bounded lane per member table) without waiting: a full lane drops the message and
  counts it, so a flooding account never holds the broker's delivery of the others' back.
  The broker a table was last heard on is remembered: its replies go there
  (docs/link.md, "The standby controller and two brokers").
* Publishing goes through one ordered queue of batches: a batch's messages are sent in
  order on each connection, their PUBACKs awaited together. Replies go to the table's broker
  (every connected one while it is not known or not connected); heartbeats and the
  retained meters go to every connected broker. Heartbeats (``urgent``) have their own
  queue: they never wait behind a backlog of replies, and replies and meters take at most
  ``MAX_INFLIGHT - URGENT_ROOM`` of the client's in-flight window, so a heartbeat is never
  held inside a client behind them either. A publish
  that fails while a broker is away, or that the broker refuses (its ACL; the session
  counts and logs it), is dropped: the tables send again from their outboxes and get the
  stored result, and every (re)connection republishes the retained meters (``on_connect``).
* A **gate** (the controller's lease, :meth:`progressived.link.runtime.leadership.
  Leadership.holds`) is asked before every connection attempt and every batch: a
  controller whose lease term has passed connects to no broker and publishes nothing.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence

import aiomqtt
import structlog

from progressived.link.core.batch import Incoming, Publication
from progressived.link.runtime.inbox import FairInbox
from progressived.mqtt.config import MqttSection
from progressived.mqtt.session import MqttSession
from progressived.mqtt.session_log import LoggedSession

log = structlog.get_logger("progressived.link.mqtt")

MAX_INFLIGHT = 1000  # publishes awaiting their PUBACK at once (the client's window)
# of which the heartbeats' own: replies and meters never take the whole window, so a
# heartbeat is written at once even while PUBACKs come late (behind a flood, on the same
# connection)
URGENT_ROOM = 200
# aiomqtt's own queue of received messages: a bound, though the session's intake files
# every message from the client's callback and leaves that queue empty
CLIENT_QUEUE_MAX = 10_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class LinkMqtt:
    """One link's broker sessions (reconnecting) with an inbox and an ordered outbox."""

    def __init__(
        self,
        settings: MqttSection,
        link_id: str,
        *,
        tables: frozenset[str] = frozenset(),
        on_connect: Callable[[], None] | None = None,
        clock_ms: Callable[[], int] = now_ms,
        gate: Callable[[], bool] | None = None,
    ) -> None:
        self.settings = settings
        self.link_id = link_id
        self.subscription = f"{settings.prefix}/link/{link_id}/from/+"
        self._to = f"{settings.prefix}/link/{link_id}/to/"
        self._from = f"{settings.prefix}/link/{link_id}/from/"
        self.tables = tables
        self.inbox = FairInbox(tables)
        self.published = 0
        self.dropped = 0
        self.gate = gate
        self._on_connect = on_connect
        self._clock_ms = clock_ms
        self._last_ms = 0
        self._route: dict[str, MqttSession] = {}  # table -> the broker it was last heard on
        self._outbox: asyncio.Queue[tuple[Sequence[Publication], bool]] = asyncio.Queue()
        self._urgent: asyncio.Queue[tuple[Sequence[Publication], bool]] = asyncio.Queue()
        self._inflight = 0  # publishes handed to the clients, not yet acknowledged
        self._room = asyncio.Event()
        self.sessions: list[MqttSession] = []
        for broker in settings.endpoints():
            options = settings.broker_options(
                link_id,
                default_username=link_id,
                max_inflight=MAX_INFLIGHT,
                max_queued_incoming=CLIENT_QUEUE_MAX,
                broker=broker,
            )
            session = MqttSession(options, observers=[LoggedSession("progressived.link.mqtt")])
            session.gate = gate
            session.subscribe(self.subscription, functools.partial(self._delivered, session))
            session.intake = functools.partial(self._received, session)
            session.on_connect(self._connected)
            self.sessions.append(session)

    @property
    def session(self) -> MqttSession:
        """The first broker's session (the status's ``broker``)."""
        return self.sessions[0]

    @property
    def connected(self) -> bool:
        """Connected to at least one broker."""
        return any(s.connected for s in self.sessions)

    @property
    def connected_count(self) -> int:
        return sum(s.connected for s in self.sessions)

    @property
    def attempts(self) -> int:
        return sum(s.attempts for s in self.sessions)

    def views(self) -> list[dict[str, object]]:
        """Each broker: where, connected or why not (the status's ``brokers``)."""
        return [
            {
                "broker": s.options.url,
                "connected": s.connected,
                "state": s.state,
                "error": s.detail,
                "connections": s.connections,
                "denied_total": s.denied_total,
            }
            for s in self.sessions
        ]

    def send(
        self, messages: Sequence[Publication], *, everywhere: bool = False, urgent: bool = False
    ) -> None:
        """Queue messages to publish, in order, after everything queued before them (of
        their lane: ``urgent`` ones, the heartbeats, go before any other): replies to their
        table's broker, or (``everywhere``, and any retained message) to every connected
        broker."""
        if messages:
            (self._urgent if urgent else self._outbox).put_nowait((messages, everywhere))

    async def _connected(self) -> None:
        if self._on_connect is not None:
            self._on_connect()

    async def run(self) -> None:
        """Connect, receive, publish, reconnect with backoff; returns only after stop()."""
        loop = asyncio.get_running_loop()
        senders = [
            loop.create_task(self._publish_loop(urgent=False), name="link-send"),
            loop.create_task(self._publish_loop(urgent=True), name="link-send-urgent"),
        ]
        try:
            await asyncio.gather(*(s.run() for s in self.sessions))
        finally:
            for sender in senders:
                sender.cancel()
            await asyncio.gather(*senders, return_exceptions=True)

    async def _delivered(self, session: MqttSession, message: aiomqtt.Message) -> None:
        """A message through the session's handlers (only without an intake)."""
        payload = message.payload
        raw = payload if isinstance(payload, bytes) else str(payload).encode()
        self._received(session, message.topic.value, raw)

    def _received(self, session: MqttSession, topic: str, raw: bytes) -> None:
        """File one message in its table's lane, from the client's callback: never waits."""
        table = topic[len(self._from) :] if topic.startswith(self._from) else ""
        # The receive time never goes backwards (a wall-clock step would otherwise
        # reorder the split window); it is journaled with each message.
        self._last_ms = max(self._last_ms, self._clock_ms())
        if self.inbox.offer(table, Incoming(topic, raw, self._last_ms)) and table in self.tables:
            self._route[table] = session  # members only: no name made up costs memory

    def _targets(self, message: Publication, everywhere: bool) -> list[MqttSession]:
        live = [s for s in self.sessions if s.connected]
        if everywhere or message.retain or not message.topic.startswith(self._to):
            return live
        home = self._route.get(message.topic[len(self._to) :])
        return [home] if home is not None and home.connected else live

    async def _publish_loop(self, urgent: bool) -> None:
        """Hand each batch to the clients in order at once; PUBACKs are awaited in the
        background (at most ``MAX_INFLIGHT`` wait), so a slow PUBACK never holds the next
        batch back and the order on each connection is the order queued."""
        pending: set[asyncio.Task[None]] = set()
        window = MAX_INFLIGHT - URGENT_ROOM
        outbox = self._urgent if urgent else self._outbox
        while True:
            batch, everywhere = await outbox.get()
            if not self.connected or (self.gate is not None and not self.gate()):
                self.dropped += len(batch)
                continue
            sends = [(s, m) for m in batch for s in self._targets(m, everywhere)]
            while not urgent and self._inflight and self._inflight + len(sends) > window:
                self._room.clear()  # the clients hold enough: whatever is next waits here
                await self._room.wait()
            self._inflight += len(sends)
            task = asyncio.get_running_loop().create_task(self._publish(sends))
            pending.add(task)
            task.add_done_callback(pending.discard)
            await asyncio.sleep(0)  # let it hand its messages to the client before the next

    async def _publish(self, sends: Sequence[tuple[MqttSession, Publication]]) -> None:
        """A batch's messages, each connection's in order, their PUBACKs awaited together
        per connection (one wait for the batch, not a task per message: the link answers
        hundreds a batch)."""
        per: dict[MqttSession, list[tuple[str, bytes, bool]]] = {}
        for session, m in sends:
            per.setdefault(session, []).append((m.topic, m.payload, m.retain))
        try:
            results = await asyncio.gather(
                *(session.publish_all(batch) for session, batch in per.items()),
                return_exceptions=True,
            )
        finally:
            self._inflight -= len(sends)
            self._room.set()
        accepted = sum(sum(r) for r in results if isinstance(r, list))
        self.published += accepted
        self.dropped += len(sends) - accepted
        failed = [r for r in results if isinstance(r, aiomqtt.MqttError)]
        if failed and not any(s.stopping for s in per):  # a clean stop says nothing
            log.warning("publish failed (the tables will ask again)", error=str(failed[0]))
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, aiomqtt.MqttError):
                raise r

    async def drain(self, timeout: float) -> None:
        """Wait (at most ``timeout``) until the outbox is sent, e.g. before a clean stop."""
        deadline = time.monotonic() + timeout
        while not self._outbox.empty() and self.connected and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """No new connection; the current ones are closed cleanly and :meth:`run` returns."""
        await asyncio.gather(*(s.stop() for s in self.sessions))
