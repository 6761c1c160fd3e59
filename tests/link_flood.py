"""One member table floods the link while another plays at a dealer's pace.

The rig: a real link controller (``progressived link``) over tables t1 and t2 on a real
Mosquitto with docs/mqtt.md's ACL and passwords (tests/test_link_acl.py's ``LinkBroker``),
``heartbeat_s`` 1.0 as shipped. The flooder is its own process (``python -m
tests.link_flood``, so it competes with the link for the CPU as a hostile host would, not
with the test's event loop): t1's account publishes, on its own topic, junk the decoder
refuses and valid contributions with fresh sequences. The good table (t2) sends one
contribution at a time, resending it after ``resend_s`` as a table's outbox does, and
records when each heartbeat arrives.

Used by tests/test_link_fairness.py (short, e2e) and tests/reliability/test_link_flood.py
(the soak).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiomqtt
import paho.mqtt.client as mqtt

from progressived.link.core.messages import (
    Contribution,
    Heartbeat,
    MeterWagers,
    Result,
    decode_link,
    encode,
    from_table_topic,
)
from progressived.runtime.control import request
from progressived.testing.config import render_toml
from progressived.testing.waits import until
from tests.link_sim import head_of

PREFIX, LINK = "progressive", "link-a"
DOLLAR = 1_000_000
PASSWORDS = {"t1": "pw-t1", "t2": "pw-t2", "link-a": "pw-link-a", "sign-lobby": "pw-sign"}
DEEP = b"[" * 1500 + b"]" * 1500
JUNK = (DEEP, b"{not json", b'{"type":"contribution"}')
HEARTBEAT_S = 1.0
MISSED_HEARTBEATS = 3  # a table's default: link-down after this many missed
LINK_DOWN_S = HEARTBEAT_S * MISSED_HEARTBEATS
VALID_EVERY = 10  # one valid contribution among this many messages while they last


def stamp_s(at: str) -> float:
    """A message's ``at`` (UTC, ISO 8601) in epoch seconds."""
    return datetime.fromisoformat(at).timestamp()


def contribution(seq: int, table: str) -> Contribution:
    return Contribution(
        table=table,
        seq=seq,
        id=f"{table}:{seq}",
        head=head_of(table, seq),
        at="2026-11-28T20:00:00Z",
        round=seq,
        wagers=(MeterWagers("pmg", 2, 2 * DOLLAR),),
    )


def write_config(tmp: Path, port: int) -> Path:
    (tmp / "link.pw").write_text(PASSWORDS["link-a"] + "\n")
    text = render_toml(
        {
            "link": {"id": LINK, "tables": "@TABLES@", "heartbeat_s": HEARTBEAT_S},
            "link.meters": [
                {"id": "pmg", "paytable": "pmg-01", "rate": 0.15, "reserve_rate": 0.02}
            ],
            "mqtt": {
                "host": "127.0.0.1",
                "port": port,
                "username": LINK,
                "password_file": tmp / "link.pw",
            },
            "ledger": {"path": tmp / "link.db"},
            "metrics": {"port": 0},
            "control": {"socket": tmp / "link.sock"},
            "log": {"format": "json"},
        }
    )
    path = tmp / "link.toml"
    path.write_text(text.replace('"@TABLES@"', json.dumps(["t1", "t2"])))
    return path


def link_status(tmp: Path) -> dict[str, Any]:
    answer = request(tmp / "link.sock", {"action": "status"}, timeout=10)
    assert answer["ok"], answer
    found: dict[str, Any] = answer["status"]
    return found


def rows_by_kind(db: Path) -> dict[str, int]:
    """The ledger's rows per kind, ``link_applied`` ones per table (``link_applied:t2``)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        found = conn.execute("SELECT kind, count(*) FROM journal GROUP BY kind").fetchall()
        tables = conn.execute(
            "SELECT actor, count(*) FROM journal WHERE kind = 'link_applied' GROUP BY actor"
        ).fetchall()
        return {str(kind): int(n) for kind, n in found} | {
            f"link_applied:{actor}": int(n) for actor, n in tables
        }
    finally:
        conn.close()


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


@dataclass
class GoodTable:
    """t2: one contribution at a time, resent after ``resend_s`` until answered."""

    port: int
    resend_s: float = 2.0  # a table's default (docs/configuration.md)
    # each heartbeat's ``at``, the link's own send time (epoch seconds): when the link sent
    # it, not when a loaded machine let this reader see it
    heartbeats: list[float] = field(default_factory=list)
    answers: list[Result] = field(default_factory=list)
    sends: int = 0  # contributions published, resends included
    waits: list[float] = field(default_factory=list)  # each contribution's, until answered
    _client: aiomqtt.Client | None = None

    async def read(self) -> None:
        assert self._client is not None
        async for message in self._client.messages:
            assert isinstance(message.payload, bytes)
            got = decode_link(message.payload)
            if isinstance(got, Heartbeat):
                self.heartbeats.append(stamp_s(got.at))
            elif isinstance(got, Result):
                self.answers.append(got)

    def answered(self, seq: int) -> Result | None:
        return next((r for r in self.answers if r.seq == seq and r.lseq > 0), None)

    async def play(self, seq: int) -> Result:
        """Send contribution ``seq`` until its final answer comes (a table's outbox)."""
        assert self._client is not None
        topic = from_table_topic(PREFIX, LINK, "t2")
        began = time.monotonic()
        while True:
            self.sends += 1
            await self._client.publish(topic, encode(contribution(seq, "t2")), qos=1)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.resend_s):
                    await until(lambda: self.answered(seq), timeout=3600, every=0.02)
            found = self.answered(seq)
            if found is not None:
                self.waits.append(time.monotonic() - began)
                return found

    def longest_gap(self, since: float, end: float) -> float:
        """The longest time the link sent no heartbeat from ``since`` to ``end`` (epoch
        seconds), judged by the link's own send times, up to its first heartbeat sent after
        ``end`` (wait for it: :meth:`heard_after`)."""
        after = min(t for t in self.heartbeats if t >= end)
        times = [since, *sorted(t for t in self.heartbeats if since < t < end), after]
        return max(b - a for a, b in itertools.pairwise(times))

    def heard_after(self, end: float) -> bool:
        return any(t >= end for t in self.heartbeats)

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[GoodTable]:
        async with aiomqtt.Client(
            "127.0.0.1", self.port, username="t2", password=PASSWORDS["t2"], identifier="t2"
        ) as client:
            self._client = client
            await client.subscribe(f"{PREFIX}/link/{LINK}/to/t2", qos=1)
            reader = asyncio.create_task(self.read())
            try:
                yield self
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader


@contextlib.contextmanager
def flooding(
    port: int, valid: int, seconds: float, rate: float
) -> Iterator[subprocess.Popen[bytes]]:
    """The flooder process: for ``seconds`` (or until a SIGTERM), t1 publishes ``rate``
    messages a second, with one of ``valid`` fresh contributions (in sequence) every
    ``VALID_EVERY`` messages until they run out; it prints ``connected``, then ``sent N``.
    Killed (SIGKILL) on the way out whatever happens."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.link_flood",
            str(port),
            str(valid),
            str(seconds),
            str(rate),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).parent.parent,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def _flood(port: int, valid: int, seconds: float, rate: float) -> int:
    """Publish ``rate`` messages a second (QoS 0, the cheapest for the sender)."""
    topic = from_table_topic(PREFIX, LINK, "t1")
    valids = [encode(contribution(seq, "t1")) for seq in range(valid, 0, -1)]
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="t1")
    client.username_pw_set("t1", PASSWORDS["t1"])
    client.max_queued_messages_set(20_000)  # paho's own buffer: wait when it is full
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        connect_by = time.monotonic() + 30
        while not client.is_connected():
            if time.monotonic() > connect_by:
                sys.exit(f"t1: not connected to the broker on port {port} within 30 s")
            time.sleep(0.01)
        print("connected", flush=True)
        start = time.monotonic()
        sent, deadline = 0, start + seconds
        while time.monotonic() < deadline and not STOP:
            ahead = sent / rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
            payload = valids.pop() if valids and sent % VALID_EVERY == 0 else JUNK[sent % 3]
            if client.publish(topic, payload, qos=0).rc == mqtt.MQTT_ERR_QUEUE_SIZE:
                if valids and sent % VALID_EVERY == 0:
                    valids.append(payload)  # in sequence: try it again
                time.sleep(0.001)
                continue
            sent += 1
        return sent
    finally:
        client.disconnect()
        client.loop_stop()


STOP: list[int] = []  # a SIGTERM ends the flood early (its count is still printed)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda signum, frame: STOP.append(signum))
    parser = argparse.ArgumentParser(description=__doc__)
    for name in ("port", "valid"):
        parser.add_argument(name, type=int)
    parser.add_argument("seconds", type=float)
    parser.add_argument("rate", type=float)
    args = parser.parse_args()
    sent = _flood(args.port, args.valid, args.seconds, args.rate)
    print(f"sent {sent}", flush=True)


if __name__ == "__main__":
    main()
