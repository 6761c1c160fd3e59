"""A scripted controller and link for the sign's browser tests: the payloads of docs/mqtt.md
and docs/link.md, published to a real broker exactly as a controller publishes them (every
table message checked against docs/mqtt.md's schemas first), so a test can put a sign in any
state at once: a $99,999,999.99 meter, three levels, a linked table closed, a link's hit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import aiomqtt

from progressived.core.money import UNITS_PER_CENT
from progressived.signs.web.model import dollars
from tests.mqtt_schemas import problems

TS = "2026-11-21T19:05:01.123456Z"


@dataclass
class TableFeed:
    """One table's controller: retained status and meters, events with ledger ``seq``s."""

    client: aiomqtt.Client
    table: str
    boot: str = "boot-1"
    prefix: str = "progressive"
    seq: int = 0
    round: int = 1
    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def publish(self, leaf: str, body: dict[str, Any], retain: bool) -> None:
        topic = f"{self.prefix}/table/{self.table}/{leaf}"
        wrong = problems(topic, body)
        assert not wrong, wrong
        await self.client.publish(topic, json.dumps(body), qos=1, retain=retain)
        self.sent.append((topic, body))

    async def online(self, boot: str | None = None) -> None:
        self.boot = boot or self.boot
        body = {
            "status": "online",
            "table": self.table,
            "boot": self.boot,
            "ts": TS,
            "version": "t",
        }
        await self.publish("status", body, retain=True)

    async def offline(self) -> None:
        await self.publish("status", {"status": "offline", "table": self.table}, retain=True)

    async def meter(
        self,
        meter: str,
        cents: int,
        state: str = "open",
        pending: list[dict[str, Any]] | None = None,
        closed: list[str] | None = None,
        link: str | None = None,
        seq: int | None = None,
    ) -> dict[str, Any]:
        if seq is None:
            self.seq += 1
            seq = self.seq
        body: dict[str, Any] = {
            "cents": cents, "display": dollars(cents), "meter": meter, "seq": seq,
            "state": state, "table": self.table, "ts": TS, "pending": pending or [],
            "closed": closed or [],
        }  # fmt: skip
        if link is not None:
            body["link"] = {"id": link, "epoch": 1, "lseq": seq}
        await self.publish(f"meter/{meter}", body, retain=True)
        return body

    async def event(self, kind: str, **keys: Any) -> dict[str, Any]:
        self.seq += 1
        body = {"kind": kind, "table": self.table, "seq": self.seq, "ts": TS,
                "round": self.round, "seat": 0, **keys}  # fmt: skip
        await self.publish("event", body, retain=False)
        return body


@dataclass
class LinkFeed:
    """A link controller's retained meter (docs/link.md, "meter"), in (epoch, lseq) order."""

    client: aiomqtt.Client
    link: str
    prefix: str = "progressive"
    lseq: int = 0

    async def meter(self, meter: str, cents: int, hit: dict[str, Any] | None = None) -> None:
        self.lseq += 1
        body: dict[str, Any] = {
            "type": "meter", "link": self.link, "meter": meter,
            "units": cents * UNITS_PER_CENT + 3_500, "epoch": 1, "lseq": self.lseq,
            "head": {"seq": self.lseq, "hash": "0" * 64},
        }  # fmt: skip
        if hit is not None:
            body["hit"] = hit
        topic = f"{self.prefix}/link/{self.link}/meter/{meter}"
        await self.client.publish(topic, json.dumps(body), qos=1, retain=True)
