"""One connection attempt to the broker: its options, its TLS, its client, what its errors mean.

Every product client (the table daemon, the link controller, the signs) connects through
:class:`~progressived.mqtt.session.MqttSession`, which builds a :class:`SessionClient` here
for each attempt. This module imports neither pydantic nor structlog: the web sign, which
must stay small (docs/performance.md), uses it too.

* **MQTT 5** where the broker speaks it (Mosquitto 2 does): a publish the broker refuses
  (its ACL) comes back as a PUBACK reason code of 0x80 or more, which MQTT 3.1.1 cannot say.
  aiomqtt 2.x drops that code, so :meth:`SessionClient.publish_acked` returns it.
* **The client id** is the account's user name (docs/mqtt.md, "Accounts and client ids"):
  with Mosquitto's ``use_username_as_clientid`` no account can take another's session.
* **TCP_NODELAY** on every socket (:data:`NO_DELAY`).
* **An intake** (the link controller's): every received message handed at once, from the
  client's own callback, to a function that files it without waiting (aiomqtt's message
  iterator costs a task and a turn of the event loop per message), and the socket read in
  bursts and chunks, written in joined packets, with a wide receive window
  (:mod:`progressived.mqtt.intake` says why each).
"""

from __future__ import annotations

import asyncio
import enum
import re
import socket
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import aiomqtt
import paho.mqtt.client as paho
from aiomqtt.exceptions import MqttConnectError
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from progressived.mqtt.intake import IntakeSocket, intake_properties

# Every MQTT socket of the product turns Nagle's algorithm off: a reply or a meter published
# while the previous packet is unacknowledged would otherwise wait for the peer's delayed
# ACK (about 40 ms on Linux), twice per request and answer (docs/performance.md, "The link").
NO_DELAY: list[tuple[int, int, int]] = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]

# CONNACK codes meaning "who you are is not allowed": MQTT 3.1.1 (4, 5) and 5.0 (134, 135).
NOT_AUTHORISED_CODES = frozenset({4, 5, 134, 135})
# CONNACK "unsupported protocol version" (MQTT 5: 0x84; 3.1.1: 1): a broker that speaks
# only MQTT 3.1.1 (e.g. the demo's embedded amqtt).
UNSUPPORTED_PROTOCOL_CODES = frozenset({1, 132})
REFUSED = 0x80  # an acknowledgement's reason code from here up: the packet was not accepted
PENDING_CALLS_WARN = 100_000  # publishes awaiting PUBACK before aiomqtt logs a warning
Intake = Callable[[str, bytes], None]  # (topic, payload): files a message, never waits


@dataclass(frozen=True, slots=True)
class TlsOptions:
    """TLS toward the broker: its CA (None: the system's), a client certificate."""

    ca_certs: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    insecure: bool = False  # skip the host-name check


@dataclass(frozen=True, slots=True)
class BrokerOptions:
    """Where the broker is and who this client is; read once, when the session is made."""

    host: str = "127.0.0.1"
    port: int = 1883
    client_id: str | None = None  # None: the broker assigns one (an anonymous sign)
    username: str | None = None
    password: str | None = None
    tls: TlsOptions | None = None
    keepalive_s: int = 15
    publish_timeout_s: float = 10.0
    reconnect_initial_s: float = 0.5
    reconnect_max_s: float = 30.0
    max_inflight: int | None = None  # QoS 1 publishes awaiting PUBACK at once (paho: 20)
    max_queued_incoming: int | None = None  # received messages waiting to be read
    # Brokers to move to, in turn, when this one fails (docs/mqtt.md, "Two brokers"):
    # (host, port) pairs after ``host``/``port``, which come first.
    fallbacks: tuple[tuple[str, int], ...] = ()

    @property
    def brokers(self) -> tuple[tuple[str, int], ...]:
        """Every broker of this client, in the order tried: ``host:port`` first."""
        return ((self.host, self.port), *self.fallbacks)

    @property
    def url(self) -> str:
        return f"{'mqtts' if self.tls else 'mqtt'}://{self.host}:{self.port}"

    @property
    def loss_bound_s(self) -> float:
        """How long a silent broker can go unnoticed while idle: paho pings after
        ``keepalive_s`` without traffic and gives up ``keepalive_s`` later; it checks once a
        second (docs/mqtt.md, "Reconnecting")."""
        return 2.0 * self.keepalive_s + 2.0


def broker_address(text: str, default_port: int) -> tuple[str, int]:
    """``host:port``, ``host`` or ``[v6]:port`` as (host, port); ValueError if it is not."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            host = ""
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not host or any(c.isspace() or c in "/@" for c in host):
        raise ValueError(f"{text!r} is not a broker address (host:port)")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
    return host, int(port_text)


def tls_parameters(tls: TlsOptions) -> aiomqtt.TLSParameters:
    """The one TLS builder: the broker's certificate is always verified against the CA."""
    return aiomqtt.TLSParameters(
        ca_certs=str(tls.ca_certs) if tls.ca_certs else None,
        certfile=str(tls.certfile) if tls.certfile else None,
        keyfile=str(tls.keyfile) if tls.keyfile else None,
        cert_reqs=ssl.CERT_REQUIRED,
    )


class SessionClient(aiomqtt.Client):
    """aiomqtt's client, plus the PUBACK's reason code of each QoS 1 publish.

    aiomqtt 2.x (pinned ``<3``) sets the publish's event and drops the code; this records a
    failing code for the message id the publish awaits and returns it. It reuses aiomqtt's
    own bookkeeping (``_client``, ``_pending_call``, ``_wait_for``), as its ``publish`` does.
    """

    def __init__(self, *args: Any, intake: Intake | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refusals: dict[int, ReasonCode] = {}
        self._intake = intake
        if intake is not None:
            IntakeSocket(self._client).install()

    def _on_message(self, client: paho.Client, userdata: Any, message: paho.MQTTMessage) -> None:
        if self._intake is None:
            super()._on_message(client, userdata, message)
        else:
            self._intake(message.topic, bytes(message.payload))

    def _on_publish(
        self,
        client: paho.Client,
        userdata: Any,
        mid: int,
        reason_code: ReasonCode,
        properties: Properties,
    ) -> None:
        if reason_code.is_failure and mid in self._pending_publishes:
            self._refusals[mid] = reason_code
        super()._on_publish(client, userdata, mid, reason_code, properties)

    async def publish_acked(
        self,
        topic: str,
        payload: str | bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        timeout: float | None = None,
    ) -> ReasonCode | None:
        """Publish and wait for the broker's acknowledgement (QoS 1: its PUBACK).

        Returns None when accepted, or the reason code (0x80 and up) the broker refused it
        with. Raises :class:`aiomqtt.MqttError` when the connection fails meanwhile.
        """
        info = self._client.publish(topic, payload, qos, retain)
        if info.rc != paho.MQTT_ERR_SUCCESS:
            raise aiomqtt.MqttCodeError(info.rc, "Could not publish message")
        if not info.is_published():
            confirmation = asyncio.Event()
            with self._pending_call(info.mid, confirmation, self._pending_publishes):
                await self._wait_for(confirmation.wait(), timeout=timeout)
            if not info.is_published():  # woken by the lost connection, not by a PUBACK
                raise aiomqtt.MqttError("Disconnected while awaiting the acknowledgement")
        return self._refusals.pop(info.mid, None)

    async def publish_all(
        self, messages: Sequence[tuple[str, bytes, bool]], *, timeout: float | None = None
    ) -> list[ReasonCode | None]:
        """Publish each ``(topic, payload, retain)`` at QoS 1, in order, and wait once for
        all their PUBACKs: each one's refused reason code, or None when accepted.

        Why beside :meth:`publish_acked`: a batch of the link's answers awaited one by one
        cost an event, a task and aiomqtt's count of every pending call per message (that
        count alone grows with the batch). Raises :class:`aiomqtt.MqttError` when the
        connection fails meanwhile or the PUBACKs are not all back within ``timeout``.
        """
        infos: list[paho.MQTTMessageInfo] = []
        try:
            for topic, payload, retain in messages:
                info = self._client.publish(topic, payload, 1, retain)
                if info.rc != paho.MQTT_ERR_SUCCESS:
                    raise aiomqtt.MqttCodeError(info.rc, "Could not publish message")
                infos.append(info)
            waiting = [info for info in infos if not info.is_published()]
            if waiting:
                done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                acks = _Acks(len(waiting), done)
                for info in waiting:
                    self._pending_publishes[info.mid] = acks  # type: ignore[assignment]
                try:
                    async with asyncio.timeout(self.timeout if timeout is None else timeout):
                        await done
                except TimeoutError:
                    raise aiomqtt.MqttError("Operation timed out") from None
                finally:
                    for info in waiting:
                        self._pending_publishes.pop(info.mid, None)
            if not all(info.is_published() for info in infos):  # woken by the lost connection
                raise aiomqtt.MqttError("Disconnected while awaiting the acknowledgement")
            return [self._refusals.pop(info.mid, None) for info in infos]
        finally:
            for info in infos:  # after a failure: no refusal left behind for a reused id
                self._refusals.pop(info.mid, None)

    async def __aenter__(self) -> Self:
        await super().__aenter__()
        self._disconnected.add_done_callback(self._release_pending)
        return self

    def _release_pending(self, _: asyncio.Future[None]) -> None:
        """The connection is gone: no PUBACK will come, so every publish awaiting one fails
        now (aiomqtt would let each wait for its whole timeout)."""
        for event in list(self._pending_publishes.values()):
            event.set()


class _Acks:
    """What :meth:`SessionClient.publish_all` files under each message id it waits for:
    aiomqtt ``set()``s it at the message's PUBACK (or when the connection is lost), and the
    last one wakes the batch's one waiter."""

    __slots__ = ("done", "left")

    def __init__(self, left: int, done: asyncio.Future[None]) -> None:
        self.left, self.done = left, done

    def set(self) -> None:
        self.left -= 1
        if self.left <= 0 and not self.done.done():
            self.done.set_result(None)


def new_client(
    options: BrokerOptions,
    *,
    v5: bool,
    will: aiomqtt.Will | None = None,
    intake: Intake | None = None,
) -> SessionClient:
    """A fresh client for one attempt (a reused aiomqtt client can report "connected"
    before the broker acknowledged); ``intake``: every message goes to it (see the module)."""
    tls = options.tls
    client = SessionClient(
        hostname=options.host,
        port=options.port,
        identifier=options.client_id,
        username=options.username,
        password=options.password,
        protocol=aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311,
        will=will,
        keepalive=options.keepalive_s,
        tls_params=tls_parameters(tls) if tls is not None else None,
        tls_insecure=tls.insecure if tls is not None else None,
        timeout=options.publish_timeout_s,
        max_inflight_messages=options.max_inflight,
        max_queued_incoming_messages=options.max_queued_incoming,
        socket_options=NO_DELAY,
        intake=intake,
        properties=intake_properties() if intake is not None and v5 else None,
    )
    if options.max_inflight is not None:
        # aiomqtt warns once per publish beyond 10 awaiting their PUBACK (queued ones
        # included); the link has a batch's replies in flight by design (a log line per
        # reply, 17,000 in 20 s under 50 tables, cost a third of its CPU). Its inflight
        # window is max_inflight. A table keeps the warning: a backlog there is news.
        client.pending_calls_threshold = PENDING_CALLS_WARN
    return client


def _code(exc: BaseException) -> int | None:
    if isinstance(exc, aiomqtt.MqttCodeError):
        rc = exc.rc
        return rc.value if isinstance(rc, ReasonCode) else rc
    return None


def login_refused(exc: BaseException) -> bool:
    """Whether a failed connection was the broker refusing who we are (wrong user name or
    password, an anonymous client where none is allowed)."""
    return isinstance(exc, MqttConnectError) and _code(exc) in NOT_AUTHORISED_CODES


def protocol_unsupported(exc: BaseException) -> bool:
    return isinstance(exc, MqttConnectError) and _code(exc) in UNSUPPORTED_PROTOCOL_CODES


class Ending(enum.Enum):
    """Why an attempt failed or a connection ended, as a type a client decides on (the
    words for people are :func:`describe`'s)."""

    CLOSED = "closed"  # the broker closed the connection
    KEEPALIVE = "keepalive"  # the broker did not answer the keepalive ping in time
    LOGIN_REFUSED = "login refused"  # wrong user name or password, or anonymous refused
    SUBSCRIPTION_REFUSED = "subscription refused"  # a SUBACK failure (not authorised to read)
    FAILED = "failed"  # anything else: unreachable, refused connection, socket or TLS error


def ending(exc: BaseException) -> Ending:
    """The :class:`Ending` of a failed attempt or a lost connection (see :func:`describe`)."""
    if login_refused(exc):
        return Ending.LOGIN_REFUSED
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, aiomqtt.MqttCodeError) and isinstance(seen.rc, ReasonCode):
            name = seen.rc.getName()
            if name == "Keep alive timeout":
                return Ending.KEEPALIVE
            if name == "Unspecified error" and not isinstance(seen, MqttConnectError):
                return Ending.CLOSED
            return Ending.FAILED
        seen = seen.__cause__
    return Ending.FAILED


def describe(exc: BaseException) -> str:
    """A short reason for a failed attempt or a lost connection, for people: the broker's
    reason code by name, the socket's error, or a keepalive timeout."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, aiomqtt.MqttCodeError) and isinstance(seen.rc, ReasonCode):
            name = seen.rc.getName()
            if name == "Unspecified error" and not isinstance(seen, MqttConnectError):
                return "connection closed"
            if name == "Keep alive timeout":
                return "no answer to the keepalive ping"
            return name.lower() if name != "Not authorized" else "not authorised"
        if isinstance(seen, ssl.SSLError):
            return str(seen)
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror.lower()
        seen = seen.__cause__
    text = re.sub(r"^\[Errno -?\d+\] ", "", str(exc).strip())  # aiomqtt's text of an OSError
    return text or type(exc).__name__
