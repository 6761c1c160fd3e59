"""A link controller on a real Mosquitto with the in-memory stand-in ledger, and tables
that speak to it over MQTT (tests only)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiomqtt

from progressived.link.core.messages import (
    LinkMessage,
    TableMessage,
    decode_link,
    encode,
    from_table_topic,
)
from progressived.link.runtime.config import LinkConfig, link_config_from
from progressived.link.runtime.controller import LinkController
from progressived.testing.broker import Mosquitto
from progressived.testing.waits import until
from tests.conftest import ROOT
from tests.link_ledger_stub import MemoryJournal

PREFIX = "progressive"
LINK = "link-a"


def link_data(port: int, tmp: Path, **link: Any) -> dict[str, Any]:
    return {
        "link": {
            "id": LINK,
            "tables": ["t1", "t2", "t3"],
            "heartbeat_s": 0.2,
            "paytables": str(ROOT / "config" / "paytables"),
            "meters": [
                {"id": "pmg", "paytable": "pmg-01", "rate": "0.03", "reserve_rate": "0.005"}
            ],
            **link,
        },
        "mqtt": {"port": port, "reconnect_initial_s": 0.1, "reconnect_max_s": 0.5},
        "ledger": {"path": str(tmp / "link.db")},
        "metrics": {"enabled": False},
        "control": {"socket": str(tmp / "control.sock")},
    }


def link_config(broker: Mosquitto, tmp: Path, **link: Any) -> LinkConfig:
    return link_config_from(link_data(broker.port, tmp, **link), tmp / "link.toml")


@contextlib.asynccontextmanager
async def running(config: LinkConfig) -> AsyncIterator[tuple[LinkController, MemoryJournal]]:
    journal = MemoryJournal(config.params)
    controller = LinkController(config, lambda: journal)
    task = asyncio.create_task(controller.run(install_signals=False))
    try:
        await until(lambda: controller.mqtt.connected or task.done(), "the link connected")
        yield controller, journal
    finally:
        controller.request_stop()
        assert await asyncio.wait_for(task, 10) == 0


class TableClient:
    """One table's MQTT session: sends messages on its own topic, collects the link's."""

    def __init__(self, broker: Mosquitto, table: str, password: str | None = None) -> None:
        self.broker, self.table, self.password = broker, table, password
        self.got: list[tuple[str, LinkMessage, bool]] = []
        self._client: aiomqtt.Client | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> TableClient:
        self._client = aiomqtt.Client(
            "127.0.0.1",
            self.broker.port,
            username=self.table,
            password=self.password,
            max_inflight_messages=1000,
        )
        await self._client.__aenter__()
        await self._client.subscribe(f"{PREFIX}/link/{LINK}/to/{self.table}", qos=1)
        await self._client.subscribe(f"{PREFIX}/link/{LINK}/meter/#", qos=1)
        self._task = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None and self._client is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._client.__aexit__(None, None, None)

    async def _read(self) -> None:
        assert self._client is not None
        async for message in self._client.messages:
            payload = message.payload
            assert isinstance(payload, bytes)
            self.got.append((message.topic.value, decode_link(payload), message.retain))

    async def send(self, msg: TableMessage | bytes, *, topic_table: str | None = None) -> None:
        assert self._client is not None
        topic = from_table_topic(PREFIX, LINK, topic_table or self.table)
        payload = msg if isinstance(msg, bytes) else encode(msg)
        await self._client.publish(topic, payload, qos=1)

    def of_type(self, kind: str) -> list[LinkMessage]:
        return [m for _, m, _ in self.got if m.type == kind]

    async def wait(self, kind: str, check: Callable[[Any], bool], timeout: float = 10.0) -> Any:
        found: list[Any] = []

        def seen() -> bool:
            found[:] = [m for m in self.of_type(kind) if check(m)]
            return bool(found)

        await until(seen, f"a {kind} that passes the check", timeout)
        return found[-1]
