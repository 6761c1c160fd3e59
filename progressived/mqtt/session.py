"""The one MQTT session helper: every product client's connection to the broker.

A session connects (a fresh :class:`~progressived.mqtt.client.SessionClient` per attempt:
aiomqtt 2.x clients are not reusable), subscribes what its users registered, runs their
on-connect callbacks (publish the retained status and meters again: a broker restarted
empty has lost them), runs their loops while connected, dispatches the messages it
receives, and reconnects with jittered exponential backoff (:class:`~progressived.runtime.backoff.
Backoff`) when the connection fails or is lost. Users: the table daemon (one session for the
sign publisher and the link client), the link controller, the signs.

* **A lost connection is noticed while idle.** The session always awaits the client's
  message iterator, which ends as soon as paho sees the socket close (a broker that dies is
  seen at once) or its keepalive ping go unanswered (a silent broker:
  :attr:`~progressived.mqtt.client.BrokerOptions.loss_bound_s`).
* **A refused login is not an unreachable broker**: the state says ``not authorised`` with
  the broker's reason; a session made with ``give_up_refused`` raises :class:`NotAuthorised`
  instead of retrying (a sign: retrying cannot help).
* **A refused publish is seen** (MQTT 5 PUBACK reason code 0x80 and up): :meth:`publish`
  returns False, counts it and remembers the topic until a publish on it is accepted.
* A broker that speaks only MQTT 3.1.1 (CONNACK "unsupported protocol version") is spoken
  to in 3.1.1 for the rest of the session: its refusals cannot be seen.
* **Several brokers** (:attr:`~progressived.mqtt.client.BrokerOptions.fallbacks`): each
  failed attempt or lost connection moves the session to the next broker of the list, in
  turn, after the same jittered backoff (docs/mqtt.md, "Two brokers"): a client whose broker
  dies is on the next one within a backoff step. :attr:`MqttSession.options` is always the
  broker of the current (or next) attempt.
* A **gate** (:attr:`MqttSession.gate`), when set, is asked before every attempt: while it
  says no, the session waits a backoff step instead of connecting (the link controller's
  lease: a controller whose term has passed must not take the link's client id back).

What to say about all this is the observers' business (:class:`SessionObserver`): the
daemons log it (:mod:`progressived.mqtt.session_log`), the signs print it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiomqtt
from paho.mqtt.reasoncodes import ReasonCode

from progressived.mqtt.client import (
    REFUSED,
    BrokerOptions,
    Ending,
    Intake,
    SessionClient,
    describe,
    ending,
    login_refused,
    new_client,
    protocol_unsupported,
)
from progressived.runtime.backoff import Backoff

Handler = Callable[[aiomqtt.Message], Awaitable[None]]
Callback = Callable[[], Coroutine[Any, Any, None]]
WillFactory = Callable[[], Awaitable[aiomqtt.Will | None]]


class SessionState(enum.StrEnum):
    """Where a session is. The value is what ``progressivectl status`` shows as the broker's
    ``state`` and the link controller's status reports (docs/operations.md, docs/link.md)."""

    CONNECTING = "connecting"
    """Before the first connection."""
    CONNECTED = "connected"
    UNREACHABLE = "unreachable"
    """The last attempt failed or the connection was lost (``detail`` says how); retrying."""
    NOT_AUTHORISED = "not authorised"
    """The broker refused the login or a subscription (``detail``: its reason)."""
    STOPPED = "stopped"
    """:meth:`MqttSession.stop` was called, or :meth:`MqttSession.run` was cancelled."""


class NotAuthorised(Exception):
    """The broker refused this client: its login, or a subscription (SUBACK failure)."""


class SubscriptionRefused(NotAuthorised):
    """The broker refused a subscription (SUBACK failure): not authorised to read it."""


class SessionObserver(Protocol):
    """Told what happens to a session (each method is called on the event loop)."""

    def connected(self, session: MqttSession) -> None: ...

    def disconnected(self, session: MqttSession, retry_in_s: float | None) -> None:
        """An attempt failed or the connection was lost (``session.state`` and
        ``session.detail`` say how); ``retry_in_s`` None: the session gives up."""

    def denied(self, session: MqttSession, topic: str, reason: str, first: bool) -> None:
        """The broker refused a publish on ``topic``; ``first``: since it last accepted one."""

    def accepted(self, session: MqttSession, topic: str) -> None:
        """The broker accepted a publish on a topic it had refused."""

    def downgraded(self, session: MqttSession) -> None:
        """The broker speaks only MQTT 3.1.1."""


@dataclass(frozen=True, slots=True)
class _Subscription:
    topic_filter: str
    handler: Handler
    qos: int


class MqttSession:
    """One account's connection to the broker, kept up until :meth:`stop`."""

    def __init__(
        self,
        options: BrokerOptions,
        *,
        observers: Sequence[SessionObserver] = (),
        give_up_refused: bool = False,
        backoff: Backoff | None = None,
    ) -> None:
        self.options = options
        self.observers = list(observers)
        self.give_up_refused = give_up_refused
        self.backoff = backoff or Backoff(options.reconnect_initial_s, options.reconnect_max_s)
        self.will: WillFactory | None = None  # the last will of each attempt (built per attempt)
        self.gate: Callable[[], bool] | None = None  # asked before each attempt (None: yes)
        # every message, at once, instead of the handlers (progressived.mqtt.client)
        self.intake: Intake | None = None
        self.brokers = options.brokers
        self.broker_index = 0  # the broker of the current (or next) attempt in ``brokers``
        self.v5 = True  # until the broker says it speaks only MQTT 3.1.1
        self.state: SessionState = SessionState.CONNECTING
        self.detail = ""  # why not connected (the broker's reason, the socket's error)
        self.ending: Ending | None = None  # the same as a type, for a client to decide on
        self.attempts = 0
        self.connections = 0
        self.was_connected = False  # the last failure ended a connection (not an attempt)
        self.denied_total = 0  # publishes the broker refused (PUBACK reason >= 0x80)
        self.denied: dict[str, str] = {}  # topic -> reason, until a publish there is accepted
        self._subscriptions: list[_Subscription] = []
        self._on_connect: list[Callback] = []
        self._loops: list[Callback] = []
        self._client: SessionClient | None = None
        self._stopping = False
        self._stop_event = asyncio.Event()

    # ------------------------------------------------------------------ registration
    def subscribe(self, topic_filter: str, handler: Handler, qos: int = 1) -> None:
        """Subscribed at every connection, in the order registered, before the on-connect
        callbacks; ``handler`` gets each message whose topic matches."""
        self._subscriptions.append(_Subscription(topic_filter, handler, qos))

    def on_connect(self, callback: Callback) -> None:
        """Run at every connection, in the order registered, before the loops start."""
        self._on_connect.append(callback)

    def while_connected(self, loop: Callback) -> None:
        """Run as a task during every connection; cancelled when it ends. An MQTT error
        raised by it ends the connection (and a reconnection follows)."""
        self._loops.append(loop)

    @property
    def connected(self) -> bool:
        return self.state is SessionState.CONNECTED

    @property
    def stopping(self) -> bool:
        return self._stopping

    # ------------------------------------------------------------------ publishing
    async def publish(
        self,
        topic: str,
        payload: str | bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        timeout: float | None = None,
    ) -> bool:
        """Publish on the current connection; False when the broker refused it (MQTT 5).

        Raises :class:`aiomqtt.MqttError` when not connected or when the connection fails.
        """
        client = self._client
        if client is None or not self.connected:
            raise aiomqtt.MqttError("not connected to the broker")
        code = await client.publish_acked(
            topic,
            payload,
            qos=qos,
            retain=retain,
            timeout=timeout or self.options.publish_timeout_s,
        )
        return self._accepted(topic, code)

    async def publish_all(
        self, messages: Sequence[tuple[str, bytes, bool]], *, timeout: float | None = None
    ) -> list[bool]:
        """Publish each ``(topic, payload, retain)`` at QoS 1 on the current connection, in
        order, their PUBACKs awaited together; for each, False when the broker refused it.

        Raises :class:`aiomqtt.MqttError` when not connected or when the connection fails
        (or the PUBACKs are not all back within the timeout): then none counts as sent.
        """
        client = self._client
        if client is None or not self.connected:
            raise aiomqtt.MqttError("not connected to the broker")
        codes = await client.publish_all(
            messages, timeout=timeout or self.options.publish_timeout_s
        )
        return [self._accepted(m[0], code) for m, code in zip(messages, codes, strict=True)]

    def _accepted(self, topic: str, code: ReasonCode | None) -> bool:
        """A publish's PUBACK: counted and told to the observers when refused."""
        if code is not None and code.value >= REFUSED:
            reason = code.getName()
            reason = "not authorised" if reason == "Not authorized" else reason.lower()
            first = topic not in self.denied
            self.denied_total += 1
            # A new dict each time: the metrics thread reads it without the event loop.
            self.denied = {**self.denied, topic: reason}
            for observer in self.observers:
                observer.denied(self, topic, reason, first)
            return False
        if topic in self.denied:
            self.denied = {t: r for t, r in self.denied.items() if t != topic}
            for observer in self.observers:
                observer.accepted(self, topic)
        return True

    # ------------------------------------------------------------------ life
    async def run(self) -> None:
        """Connect and stay connected until :meth:`stop`; returns then. Raises
        :class:`NotAuthorised` when refused and made with ``give_up_refused``. Cancelled,
        it is stopped too (its state says so)."""
        try:
            await self._run()
        except asyncio.CancelledError:
            self.state = SessionState.STOPPED
            raise

    async def _run(self) -> None:
        while not self._stopping:
            if self.gate is not None and not self.gate():
                await self._pause(self.backoff.next())
                continue
            self.attempts += 1
            will = await self.will() if self.will is not None else None
            client = new_client(self.options, v5=self.v5, will=will, intake=self.intake)
            began: float | None = None
            failure: BaseException | None = None
            noted = False
            try:
                async with client:
                    began = time.monotonic()
                    self._client = client
                    try:
                        await self._serve(client)
                    except (aiomqtt.MqttError, NotAuthorised) as exc:
                        # Noted now, before the clean disconnect below, which can take its
                        # time against a broker that stopped answering.
                        failure, noted = exc, True
                        self._ended(exc, began)
                        raise
                    finally:
                        self._client = None
            except (aiomqtt.MqttError, NotAuthorised) as exc:
                if not self._stopping and self.v5 and protocol_unsupported(exc):
                    self.v5 = False
                    for observer in self.observers:
                        observer.downgraded(self)
                    continue
                failure = failure or exc
            if self._stopping:
                break
            if not noted:  # the attempt failed, or the broker closed the connection cleanly
                self._ended(failure, began)
            giving_up = self.state is SessionState.NOT_AUTHORISED and self.give_up_refused
            delay = None if giving_up else self.backoff.next()
            for observer in self.observers:
                observer.disconnected(self, delay)
            if delay is None:
                raise NotAuthorised(self.detail)
            self._next_broker()
            await self._pause(delay)
        self.state = SessionState.STOPPED

    async def _pause(self, delay: float) -> None:
        """Wait ``delay`` seconds, or less if :meth:`stop` is called."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._stop_event.wait()

    def _next_broker(self) -> None:
        """The next attempt goes to the next broker of the list (the same one if alone)."""
        if len(self.brokers) > 1:
            self.broker_index = (self.broker_index + 1) % len(self.brokers)
            host, port = self.brokers[self.broker_index]
            self.options = dataclasses.replace(self.options, host=host, port=port)

    def _ended(self, failure: BaseException | None, began: float | None) -> None:
        """Note why the attempt or the connection ended. The backoff starts again from the
        first step only after a connection that lasted (two clients taking turns must not
        hammer the broker)."""
        self.was_connected = self.state is SessionState.CONNECTED
        if began is not None and time.monotonic() - began >= self.options.keepalive_s:
            self.backoff.reset()
        refused = isinstance(failure, NotAuthorised) or (
            failure is not None and login_refused(failure)
        )
        self.state = SessionState.NOT_AUTHORISED if refused else SessionState.UNREACHABLE
        if failure is None:
            self.detail, self.ending = "connection closed", Ending.CLOSED
        elif isinstance(failure, NotAuthorised):
            self.detail = str(failure)
            reading = isinstance(failure, SubscriptionRefused)
            self.ending = Ending.SUBSCRIPTION_REFUSED if reading else Ending.LOGIN_REFUSED
        else:
            self.detail, self.ending = describe(failure), ending(failure)

    async def _serve(self, client: SessionClient) -> None:
        """One connection: subscribe, on-connect callbacks, then the loops and the messages
        until the connection fails (raises) or :meth:`stop` (returns)."""
        for sub in self._subscriptions:
            granted = await client.subscribe(sub.topic_filter, qos=sub.qos)
            if suback_refused(granted):
                raise SubscriptionRefused(f"not authorised to read {sub.topic_filter}")
        if self._stopping:
            return
        self.state, self.detail, self.ending = SessionState.CONNECTED, "", None
        self.connections += 1
        for observer in self.observers:
            observer.connected(self)
        for callback in self._on_connect:
            await callback()
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(self._receive(client), name="mqtt-receive")]
        tasks += [loop.create_task(run(), name="mqtt-loop") for run in self._loops]
        stop = loop.create_task(self._stop_event.wait(), name="mqtt-stop")
        pending: set[asyncio.Task[Any]] = {*tasks, stop}
        try:
            while True:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if stop in done:
                    return
                for task in done:
                    error = task.exception()
                    if error is not None:
                        raise error
        finally:
            for task in (*tasks, stop):
                task.cancel()
            await asyncio.gather(*tasks, stop, return_exceptions=True)

    async def _receive(self, client: SessionClient) -> None:
        subscriptions = self._subscriptions
        async for message in client.messages:
            for sub in subscriptions:
                if message.topic.matches(sub.topic_filter):
                    await sub.handler(message)

    async def stop(self, farewell: Callback | None = None, timeout: float = 2.0) -> None:
        """Stop: ``farewell`` first while connected (e.g. the offline status, so that a
        clean stop needs no last will), then disconnect cleanly; :meth:`run` returns."""
        if farewell is not None and self.connected:
            with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
                async with asyncio.timeout(timeout):
                    await farewell()
        self._stopping = True
        self._stop_event.set()


def suback_refused(granted: object) -> bool:
    """Whether a SUBACK refused the subscription (0x80, or an MQTT 5 failure code)."""
    codes = granted if isinstance(granted, (list, tuple)) else [granted]
    for code in codes:
        value = getattr(code, "value", code)
        if isinstance(value, int) and value >= REFUSED:
            return True
    return False
