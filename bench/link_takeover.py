"""How long a standby link controller takes to serve after the active one is SIGKILLed.

Why a module of its own: a takeover is a property of processes, not of code paths -- two
``progressived link`` processes over one real PostgreSQL (``progressived.testing.postgres``)
and a real Mosquitto, a table streaming contributions (one every 20 ms, each sent again
every 0.3 s until answered, as a table's outbox does). Each run SIGKILLs the active
controller and measures, from the kill, when the other one says ``active`` on its control
socket and when the first message sent after the kill is answered; the killed one is then
started again, as the new standby. The bound it checks against is ``lease_s`` + one poll +
the rebuild + the connection (docs/link.md, "The standby controller and two brokers").

    python -m bench.link_takeover [RUNS] [LEASE_S]     # default 7 runs, lease_s 2
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiomqtt

from progressived.link.core.messages import (
    Contribution,
    LedgerHead,
    MeterWagers,
    Result,
    decode_link,
)
from progressived.link.core.messages import encode as encode_message
from progressived.runtime.control import request
from progressived.testing.broker import Mosquitto
from progressived.testing.config import render_toml
from progressived.testing.postgres import server

PROGRESSIVED = [sys.executable, "-m", "progressived.cli.daemon"]
TABLE = "t1"
DOLLAR = 1_000_000


def write_config(folder: Path, url: str, holder: str, port: int, lease_s: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = render_toml(
        {
            "link": {"id": "link-a", "tables": "@TABLES@", "heartbeat_s": 0.5},
            "link.meters": [
                {"id": "pmg", "paytable": "pmg-01", "rate": 0.15, "reserve_rate": 0.02}
            ],
            "mqtt": {"host": "127.0.0.1", "port": port, "reconnect_initial_s": 0.2},
            "ledger": {"url": url.split("?", 1)[0], "lease_s": lease_s, "holder": holder},
            "metrics": {"enabled": False},
            "control": {"socket": folder / "link.sock"},
            "log": {"format": "json", "level": "warning"},
        },
        "# bench/link_takeover.py",
    )
    path = folder / "link.toml"
    path.write_text(text.replace('"@TABLES@"', json.dumps([TABLE])))
    return path


def role(folder: Path) -> str | None:
    try:
        answer = request(folder / "link.sock", {"action": "status"}, timeout=1)
    except (OSError, ValueError):
        return None
    status = answer.get("status")
    return str(status["role"]) if isinstance(status, dict) else None


def contribution(seq: int) -> bytes:
    digest = hashlib.sha256(f"{TABLE}:{seq}".encode()).hexdigest()
    return encode_message(
        Contribution(
            table=TABLE,
            seq=seq,
            id=f"{TABLE}:{seq}",
            head=LedgerHead(seq, digest),
            at="2026-11-27T20:00:00Z",
            round=seq,
            wagers=(MeterWagers("pmg", 1, DOLLAR),),
        )
    )


class Stream:
    """The table: a contribution every 20 ms, each resent every 0.3 s until answered."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.seq = 0
        self.sent_at: dict[int, float] = {}
        self.answered_at: dict[int, float] = {}

    async def run(self) -> None:
        async with aiomqtt.Client("127.0.0.1", self.port, identifier=TABLE) as client:
            await client.subscribe(f"progressive/link/link-a/to/{TABLE}", qos=1)
            reader = asyncio.create_task(self._read(client))
            try:
                last_resend = time.monotonic()
                while True:
                    self.seq += 1
                    self.sent_at[self.seq] = time.monotonic()
                    await client.publish(
                        f"progressive/link/link-a/from/{TABLE}", contribution(self.seq), qos=1
                    )
                    if time.monotonic() - last_resend > 0.3:
                        last_resend = time.monotonic()
                        for seq in sorted(set(self.sent_at) - set(self.answered_at)):
                            await client.publish(
                                f"progressive/link/link-a/from/{TABLE}", contribution(seq), qos=1
                            )
                    await asyncio.sleep(0.02)
            finally:
                reader.cancel()

    async def _read(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            assert isinstance(message.payload, bytes)
            reply = decode_link(message.payload)
            if isinstance(reply, Result) and reply.status != "resend":
                self.answered_at.setdefault(reply.seq, time.monotonic())


async def until(check: Any, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("timed out")
        await asyncio.sleep(0.01)
    return time.monotonic()


async def measure(runs: int, lease_s: float) -> dict[str, Any]:
    with server() as pg, Mosquitto() as broker, tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        os.environ["PGPASSFILE"] = str(pg.passfile)
        url = pg.database()
        folders = {name: tmp / name for name in ("a", "b")}
        configs = {
            n: write_config(f, url, f"ctl-{n}", broker.port, lease_s) for n, f in folders.items()
        }
        subprocess.run(
            [*PROGRESSIVED, "init", "--config", str(configs["a"])], check=True, capture_output=True
        )
        procs: dict[str, subprocess.Popen[bytes]] = {}

        def start(name: str) -> None:
            log = (folders[name] / "link.log").open("ab")
            procs[name] = subprocess.Popen(
                [*PROGRESSIVED, "link", "--config", str(configs[name])], stdout=log, stderr=log
            )

        start("a")
        await until(lambda: role(folders["a"]) == "active", 60)
        start("b")
        await until(lambda: role(folders["b"]) == "standby", 60)
        stream = Stream(broker.port)
        table = asyncio.create_task(stream.run())
        active, standby = "a", "b"
        to_active, to_answer = [], []
        try:
            for _ in range(runs):
                await asyncio.sleep(1.0)  # mid-stream
                procs[active].send_signal(signal.SIGKILL)
                killed = time.monotonic()
                procs[active].wait(10)
                first_after = stream.seq + 1
                took = await until(lambda s=standby: role(folders[s]) == "active", lease_s + 60)
                await until(lambda f=first_after: f in stream.answered_at, lease_s + 60)
                to_active.append(took - killed)
                to_answer.append(stream.answered_at[first_after] - killed)
                start(active)
                await until(lambda a=active: role(folders[a]) == "standby", 60)
                active, standby = standby, active
        finally:
            table.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await table
            for proc in procs.values():
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
            os.environ.pop("PGPASSFILE", None)
    return {
        "runs": runs,
        "lease_s": lease_s,
        "active_after_kill_s": {
            "p50": round(statistics.median(to_active), 2),
            "max": round(max(to_active), 2),
        },
        "answered_after_kill_s": {
            "p50": round(statistics.median(to_answer), 2),
            "max": round(max(to_answer), 2),
        },
        "bound_s": lease_s + min(lease_s / 4, 1.0),
    }


if __name__ == "__main__":
    args = [float(a) for a in sys.argv[1:3]]
    runs = int(args[0]) if args else 7
    lease = args[1] if len(args) > 1 else 2.0
    print(json.dumps(asyncio.run(measure(runs, lease)), indent=2))
