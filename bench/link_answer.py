"""The link's answer path alone: a batch of QoS 1 answers published, its PUBACKs awaited.

Why a module of its own: the link controller answers every message it commits, hundreds a
batch under load, and the MQTT client's per-message costs (a task, an event and a count of
every pending call per publish; one system call per packet written) were a large share of
its CPU (docs/performance.md, "The link"), invisible in ``bench.run --only link`` on a
shared machine. This measures, in one process against a real Mosquitto, the CPU time
(``time.process_time``: other processes' load moves it far less than the wall clock) per
answer of a batch of ``batch`` answers, best of ``repeat`` runs of ``batches``: published
one by one (``MqttSession.publish`` gathered) with a write per packet, as the link did, the
same with the packets joined per write, and as one batch (``MqttSession.publish_all``,
joined: the link now).

    .venv/bin/python -m bench.link_answer [--batch 200] [--batches 20] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import paho.mqtt.client as paho

from progressived.mqtt.client import BrokerOptions
from progressived.mqtt.session import MqttSession
from progressived.testing.broker import Mosquitto

PAYLOAD = b'{"awards":[],"code":"ok","head":{"hash":"' + b"9f" * 32 + b'","seq":48213}}'


async def _measure(batch: int, batches: int, repeat: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with Mosquitto() as broker:
        options = BrokerOptions(host=broker.host, port=broker.port, client_id="bench-answer",
                                max_inflight=1000, publish_timeout_s=10.0)
        session = MqttSession(options)
        session.intake = lambda topic, payload: None  # the link's client: an intake
        task = asyncio.create_task(session.run())
        while not session.connected:
            await asyncio.sleep(0.01)
        messages = [(f"bench/to/t-{i % 50:02d}", PAYLOAD, False) for i in range(batch)]

        async def one_by_one() -> None:
            await asyncio.gather(*(session.publish(t, p, retain=r) for t, p, r in messages))

        async def together() -> None:
            await session.publish_all(messages)

        ways: dict[str, Callable[[], Awaitable[None]]] = {
            "unjoined": one_by_one, "one_by_one": one_by_one, "publish_all": together,
        }
        paho_client: Any = session._client._client  # type: ignore[union-attr]
        joined = paho_client._packet_write
        for _ in range(repeat):
            for name, way in ways.items():
                # "unjoined": each packet its own write, as paho does (the link before)
                paho_client._packet_write = (
                    paho.Client._packet_write.__get__(paho_client) if name == "unjoined"
                    else joined
                )
                started = time.process_time()
                for _ in range(batches):
                    await way()
                per = (time.process_time() - started) / (batch * batches)
                out[f"{name}_us"] = min(out.get(f"{name}_us", 1e9), round(per * 1e6, 2))
        await session.stop()
        await task
    out["ratio"] = round(out["unjoined_us"] / out["publish_all_us"], 2)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, Any] = asyncio.run(_measure(args.batch, args.batches, args.repeat))
    if args.json:
        print(json.dumps(result))
    else:
        print(f"  one by one, a write per packet (before) {result['unjoined_us']:7.2f} CPU us")
        print(f"  one by one, packets joined per write    {result['one_by_one_us']:7.2f} CPU us")
        print(f"  publish_all, joined (now)               {result['publish_all_us']:7.2f} CPU us"
              f" per answer ({result['ratio']}x less)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
