"""The socket side of an intake client (the link controller's): read in bursts and in
chunks, write the queued packets together, ask the broker for a wide window.

Why: the link reads every member table's messages and answers each, hundreds a batch, on one
connection. paho, made for a client that reads a packet now and then:

* reads one packet per call while nothing is outgoing, so a busy loop read a few messages
  a second while a flooding account filled the broker's queue for it (the broker then
  dropped the other tables' messages with the flood's): :meth:`IntakeSocket.read_burst`
  reads on while the socket has more, for :data:`READ_BURST_S` each time it is readable;
* asks the socket for a packet's type, its length and its body apart (three system calls or
  more a packet): :meth:`IntakeSocket.recv` serves them from one ``recv`` of up to
  :data:`READ_CHUNK` bytes, and a burst reads what is buffered whatever the time (nothing
  else would call it for bytes already off the socket);
* sends each packet with its own ``send`` (with TCP_NODELAY one TCP segment per PUBACK and
  per answer): :meth:`IntakeSocket.write` sends the packets queued since the last write in
  one, in order;
* asks for nothing at CONNECT, so Mosquitto sends it at most 20 unacknowledged QoS 1
  messages at once: :func:`intake_properties` asks for :data:`INTAKE_RECEIVE_MAX` (MQTT 5
  Receive Maximum): the link acknowledges each message as it reads it, and its inbox lanes
  bound what it keeps (docs/link.md, "Fair share").

Measured: docs/performance.md, "The link".
"""

from __future__ import annotations

import select
import ssl
import time
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

READ_BURST_S = 0.005  # read on while the socket has more, this long
READ_CHUNK = 65536  # bytes asked of the socket at once
# QoS 1 messages the broker may send before their PUBACKs (Mosquitto's default is 20)
INTAKE_RECEIVE_MAX = 1000
PUBACK_COMMAND = 0x40  # the joined packets' command: one paho does nothing for once written


class IntakeSocket:
    """Installed on one paho client (one connection attempt): its reads and writes."""

    def __init__(self, client: paho.Client) -> None:
        self.client = client
        self._buffer = b""  # bytes read from the socket, not yet handed to paho
        self._at = 0

    def install(self) -> None:
        self.client.loop_read = self.read_burst  # type: ignore[method-assign]
        self.client._packet_write = self.write  # type: ignore[method-assign]
        self.client._sock_recv = self.recv  # type: ignore[method-assign]

    def buffered(self) -> bool:
        return self._at < len(self._buffer)

    def recv(self, bufsize: int) -> bytes:
        """paho's ``_sock_recv`` served from the buffer, refilled by one ``recv`` of up to
        :data:`READ_CHUNK` bytes when empty. Raises as paho's does when nothing is buffered
        and the socket has nothing (``BlockingIOError``) or fails; ``b""`` at its end."""
        if not self.buffered():
            data = paho.Client._sock_recv(self.client, READ_CHUNK)
            if not data:
                return data
            self._buffer, self._at = data, 0
        start = self._at
        self._at = min(len(self._buffer), start + bufsize)
        return self._buffer[start : self._at]

    def write(self) -> MQTTErrorCode:
        """paho's ``_packet_write`` with the packets queued since the last write sent in one
        ``send``: those that need nothing done once written (not a QoS 0 PUBLISH, whose
        callback paho runs then, nor a DISCONNECT), from the front of the queue, in order.
        paho keeps a partly written packet at the front and goes on with it when the socket
        is writable again, as it does with any packet."""
        queue: Any = self.client._out_packet
        if len(queue) > 1 and _joinable(queue[0]):
            parts: list[bytes] = []
            while queue and _joinable(queue[0]):
                packet = queue.popleft()
                parts.append(bytes(packet["packet"][packet["pos"] :]))
            data = b"".join(parts)
            joined = {"command": PUBACK_COMMAND, "mid": 0, "qos": 1, "pos": 0,
                      "to_process": len(data), "packet": data, "info": None}  # fmt: skip
            queue.appendleft(joined)
        return paho.Client._packet_write(self.client)

    def read_burst(self, max_packets: int = 1) -> MQTTErrorCode:
        """paho's ``loop_read`` while the socket has more, for :data:`READ_BURST_S` at
        most (paho reads one packet a call, or as many as it has messages in flight), and
        always until the buffer is empty."""
        client = self.client
        deadline = time.monotonic() + READ_BURST_S
        rc = paho.Client.loop_read(client, max_packets)
        while rc == paho.MQTT_ERR_SUCCESS:
            if not self.buffered():
                sock = client.socket()
                if time.monotonic() >= deadline or sock is None or not _readable(sock):
                    break
            rc = paho.Client.loop_read(client, max_packets)
        return rc


def intake_properties() -> Properties:
    """The CONNECT properties of an intake client (MQTT 5): its Receive Maximum."""
    properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    properties.ReceiveMaximum = INTAKE_RECEIVE_MAX
    return properties


def _joinable(packet: Any) -> bool:
    kind = packet["command"] & 0xF0
    return not ((kind == paho.PUBLISH and packet["qos"] == 0) or kind == paho.DISCONNECT)


def _readable(sock: Any) -> bool:
    if isinstance(sock, ssl.SSLSocket) and sock.pending() > 0:
        return True
    return bool(select.select([sock], [], [], 0)[0])
