"""A faulty relay between two brokers: the tables' and the link's (a shipped test double).

The link protocol must survive a broker that loses, repeats and reorders messages
(docs/link.md, "Failures"). This relay makes that happen on purpose: it carries the link's
topics from the tables' broker to the link's and back, and with the given probabilities
drops a message, sends it twice, or holds it back and sends it after the next one. Retained
meter messages are carried as they are (a sign must see the newest). Seeded: a run is
repeatable as far as the brokers' timing allows.

    relay = FaultyRelay(table_port, link_port, prefix="progressive", link="link-a",
                        drop=0.05, duplicate=0.05, reorder=0.05, seed=7)
    task = asyncio.create_task(relay.run())
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field

import aiomqtt

from progressived.mqtt.config import NO_DELAY


@dataclass
class FaultyRelay:
    table_port: int
    link_port: int
    prefix: str = "progressive"
    link: str = "link-a"
    drop: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    seed: int = 0
    host: str = "127.0.0.1"
    tally: Counter[str] = field(default_factory=Counter)

    async def run(self) -> None:
        """Relay both ways until cancelled; a broker restart is survived by reconnecting."""
        rng = random.Random(self.seed)
        base = f"{self.prefix}/link/{self.link}"
        await asyncio.gather(
            self._one_way(self.table_port, self.link_port, f"{base}/from/+", rng, "up"),
            self._one_way(self.link_port, self.table_port, f"{base}/to/+", rng, "down"),
            self._one_way(self.link_port, self.table_port, f"{base}/meter/+", rng, "meter"),
        )

    async def _one_way(
        self, src: int, dst: int, pattern: str, rng: random.Random, name: str
    ) -> None:
        while True:
            try:
                async with (
                    aiomqtt.Client(self.host, src, identifier=f"relay-{name}-in") as inbound,
                    aiomqtt.Client(
                        self.host, dst, identifier=f"relay-{name}-out", socket_options=NO_DELAY
                    ) as outbound,
                ):
                    await inbound.subscribe(pattern, qos=1)
                    held: tuple[str, bytes, bool] | None = None
                    async for message in inbound.messages:
                        payload = message.payload
                        if not isinstance(payload, (bytes, bytearray)):
                            continue
                        item = (str(message.topic), bytes(payload), bool(message.retain))
                        if name == "meter":  # retained: carried faithfully
                            await outbound.publish(item[0], item[1], qos=1, retain=item[2])
                            continue
                        roll = rng.random()
                        if roll < self.drop:
                            self.tally[f"{name}_dropped"] += 1
                            continue
                        if roll < self.drop + self.reorder and held is None:
                            held = item
                            self.tally[f"{name}_reordered"] += 1
                            continue
                        await outbound.publish(item[0], item[1], qos=1)
                        if roll < self.drop + self.reorder + self.duplicate:
                            await outbound.publish(item[0], item[1], qos=1)
                            self.tally[f"{name}_duplicated"] += 1
                        if held is not None:
                            await outbound.publish(held[0], held[1], qos=1)
                            held = None
                        self.tally[f"{name}_relayed"] += 1
            except aiomqtt.MqttError:
                self.tally[f"{name}_reconnects"] += 1
                await asyncio.sleep(0.2)
