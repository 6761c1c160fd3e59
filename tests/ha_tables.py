"""Protocol-level member tables for the HA link (tests/reliability/test_ha_chaos.py,
tests/reliability/test_ha_link_rig.py): each a :class:`~tests.link_sim.SimTable` (gapless sequences,
heads, an outbox a message leaves only when its result comes) over its own MQTT session that
moves to the next broker of ``[mqtt] hosts`` when its broker is lost, as the table daemon's
session does. Every result received is recorded with the time it came.

Why not table daemons: ten of them, each with a board simulator, are too heavy for this
2-core machine next to 3 etcd, 3 Patroni/PostgreSQL, 2 brokers and 2 controllers; the demo
(``progressived demo --tables 3 --ha``) runs real ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field

import aiomqtt

from progressived.link.core.messages import (
    Claim,
    Result,
    TableMessage,
    decode_link,
    encode,
    from_table_topic,
)
from progressived.testing.ha.link import LINK, HaLink
from tests.link_sim import SimTable

PREFIX = "progressive"
OUTBOX_MAX = 20  # a table makes no new message while this many wait (a real one closes)
RESEND_S = 0.5
RESEND_BATCH = 50


@dataclass
class StreamTable:
    """One table streaming contributions (and now and then a claim, confirmed when its
    result comes) until ``quota`` messages are made."""

    link: HaLink
    sim: SimTable
    quota: int
    rng: random.Random
    pace_s: float = 0.04  # the mean pause between two messages
    claim_every: int = 25
    broker: int | None = None  # the index of the broker it is on now
    received_at: dict[int, float] = field(default_factory=dict)  # seq -> first result
    made_at: dict[int, float] = field(default_factory=dict)
    moves: int = 0
    _client: aiomqtt.Client | None = None

    @property
    def id(self) -> str:
        return self.sim.table

    def done(self) -> bool:
        return self.sim.seq >= self.quota and not self.sim.outbox

    async def run(self) -> None:
        """Connect to the first broker that answers, stream, move on loss; until done."""
        hosts = self.link.brokers
        index = 0
        while not self.done():
            broker = hosts[index % len(hosts)]
            try:
                async with aiomqtt.Client(
                    broker.host,
                    broker.port,
                    username=self.id,
                    password=self.link.passwords[self.id],
                    identifier=self.id,
                    keepalive=2,
                    timeout=2,
                    max_inflight_messages=200,
                ) as client:
                    await client.subscribe(f"{PREFIX}/link/{LINK}/to/{self.id}", qos=1)
                    self._client, self.broker = client, index % len(hosts)
                    await self._session(client)
            except aiomqtt.MqttError:
                pass
            self._client, self.broker = None, None
            if not self.done():
                self.moves += 1
                index += 1
                await asyncio.sleep(0.1)

    async def _session(self, client: aiomqtt.Client) -> None:
        reader = asyncio.create_task(self._read(client))
        try:
            await self._send(list(self.sim.outbox.values())[:RESEND_BATCH])
            last_resend = time.monotonic()
            while not self.done():
                if reader.done():
                    reader.result()  # the broker went: raises MqttError
                if self.sim.seq < self.quota and len(self.sim.outbox) < OUTBOX_MAX:
                    await self._send([self._make()])
                if time.monotonic() - last_resend > RESEND_S:
                    last_resend = time.monotonic()
                    await self._send(list(self.sim.outbox.values())[:RESEND_BATCH])
                await asyncio.sleep(self.rng.uniform(0.5, 1.5) * self.pace_s)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
                await reader

    def _make(self) -> TableMessage:
        if (self.sim.seq + 1) % self.claim_every == 0:
            msg = self.sim.claim("straight-flush", seat=self.rng.randint(1, 7))
        else:
            msg = self.sim.contribute(self.rng.randint(1, 7))
        self.made_at[msg.seq] = time.monotonic()
        return msg

    async def _send(self, messages: list[TableMessage]) -> None:
        assert self._client is not None
        topic = from_table_topic(PREFIX, LINK, self.id)
        for msg in messages:
            await self._client.publish(topic, encode(msg), qos=1)

    async def _read(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            if not isinstance(message.payload, bytes):
                continue
            reply = decode_link(message.payload)
            again = self.sim.on_reply(reply)
            if again:
                await self._send(again[:RESEND_BATCH])
            elif (
                isinstance(reply, Result)
                and reply.table == self.id
                and reply.status != "resend"
                and reply.seq not in self.received_at
            ):
                self.received_at[reply.seq] = time.monotonic()
                await self._confirm_claim(reply)

    async def _confirm_claim(self, reply: Result) -> None:
        """A claim's result priced it: the supervisor confirms (a new message)."""
        sent = next((m for m in self.sim.sent if m.seq == reply.seq), None)
        if isinstance(sent, Claim) and reply.status == "applied":
            confirm = self.sim.confirm(sent.claim)
            self.made_at[confirm.seq] = time.monotonic()
            self.quota += 1  # the confirmation is on top of the quota
            await self._send([confirm])


def first_applied_after(tables: list[StreamTable], at: float) -> float | None:
    """When the first message made after ``at`` was answered, at any table (None: none yet)."""
    found = [
        t.received_at[seq]
        for t in tables
        for seq, made in t.made_at.items()
        if made > at and seq in t.received_at
    ]
    return min(found) if found else None
