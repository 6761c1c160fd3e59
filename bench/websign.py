"""The web sign's memory with a floor of browsers: ``.venv/bin/python -m bench.websign``.

Starts a real Mosquitto and ``progressivectl sign --web`` (a real process), publishes a bank
of tables, then opens ``--pages`` (default 50) server-sent-event streams from Python (aiohttp's
client, as many browsers would hold) and publishes ``--updates`` meter changes. Every stream
must receive every update. Figures: the floor (a bare Python importing only aiohttp.web and
aiomqtt), the server's RSS idle with no page and with the pages connected after the
updates, and the ratios; the target is <= 60 MB with 50 pages (docs/performance.md).
``--sign-file`` runs the sign as a floor does, with a sign file naming the tables and their
paytable (validated with pydantic; every update then carries its names and paytable in its
HTML). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import aiomqtt

from bench.table import rss_bytes
from progressived.signs.web.model import dollars
from progressived.testing.broker import Mosquitto, free_port, wait_for_port

MB = 1024 * 1024
TABLES = 8


async def read_stream(session: aiohttp.ClientSession, url: str, want: int, seen: list[int]) -> None:
    """Hold one SSE stream; count ``source`` events whose meter reached the last seq."""
    async with session.get(url) as response:
        event = ""
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "source":
                data = json.loads(line[6:])
                for meter in data["meters"]:
                    if meter["meter"] == "main" and meter["seq"] >= 1:
                        seen.append(meter["seq"])
                if seen and max(seen) >= want and len(seen) >= want:
                    return


FLOOR = "import aiohttp.web, aiomqtt, sys, time; print(1, flush=True); sys.stdin.read()"


def library_floor() -> int:
    """RSS of a bare Python that imports only the sign's two libraries (same machine, run)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", FLOOR], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    assert proc.stdin is not None
    proc.stdout.readline()
    time.sleep(0.5)
    rss = rss_bytes(proc.pid)
    proc.stdin.close()
    proc.wait(10)
    return rss


def sign_file(folder: Path) -> Path:
    """A sign file naming the bench's tables and their paytable (what a floor runs with)."""
    path = folder / "sign.toml"
    path.write_text(
        "[sign]\n"
        + "".join(
            f'[[sign.tables]]\nid = "bench-{n}"\nname = "Table {n}"\npaytable = "tcp-sd-1"\n'
            for n in range(TABLES)
        )
    )
    return path


async def measure(pages: int, updates: int, with_file: bool = False) -> dict[str, float | int]:
    floor = library_floor()
    with Mosquitto() as broker, tempfile.TemporaryDirectory(prefix="websign-") as scratch:
        port = free_port()
        cmd = [sys.executable, "-m", "progressived.cli.ctl", "sign", "--web",
               "--listen", f"127.0.0.1:{port}", "--port", str(broker.port)]  # fmt: skip
        if with_file:
            cmd += ["--config", str(sign_file(Path(scratch)))]
        else:  # the sign shows only the tables named (docs/sign.md, "Which tables")
            cmd += [arg for n in range(TABLES) for arg in ("--table", f"bench-{n}")]
        server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            await asyncio.to_thread(wait_for_port, "127.0.0.1", port, 15)
            async with aiomqtt.Client(broker.host, broker.port) as client:
                for number in range(TABLES):
                    table = f"bench-{number}"
                    body = {"cents": 100_000, "display": "$1,000.00", "meter": "main", "seq": 0,
                            "state": "open", "table": table, "ts": ""}  # fmt: skip
                    await client.publish(
                        f"progressive/table/{table}/meter/main", json.dumps(body), 1, True
                    )
                await asyncio.sleep(2.0)
                idle = rss_bytes(server.pid)
                url = f"http://127.0.0.1:{port}/events"
                per_table = updates // TABLES
                seen: list[list[int]] = [[] for _ in range(pages)]
                async with aiohttp.ClientSession() as session:
                    readers = [
                        asyncio.create_task(read_stream(session, url, per_table, seen[i]))
                        for i in range(pages)
                    ]
                    await asyncio.sleep(2.0)
                    started = time.monotonic()
                    for seq in range(1, per_table + 1):
                        for number in range(TABLES):
                            table = f"bench-{number}"
                            cents = 100_000 + seq * 15
                            body = {"cents": cents, "display": dollars(cents), "seq": seq,
                                    "meter": "main", "state": "open", "table": table}  # fmt: skip
                            await client.publish(
                                f"progressive/table/{table}/meter/main", json.dumps(body), 1
                            )
                    await asyncio.wait_for(asyncio.gather(*readers), 60)
                    elapsed = time.monotonic() - started
                    loaded = rss_bytes(server.pid)
            delivered = sum(len(s) for s in seen)
            return {
                "sign_file": with_file,
                "pages": pages,
                "updates": per_table * TABLES,
                "delivered_to_every_page": delivered >= pages * per_table,
                "seconds": round(elapsed, 2),
                "rss_floor_libraries_mb": round(floor / MB, 1),
                "rss_idle_mb": round(idle / MB, 1),
                "rss_pages_mb": round(loaded / MB, 1),
                "ratio_to_idle": round(loaded / idle, 2),
                "ratio_to_floor": round(loaded / floor, 2),
                "target_mb": 60,
            }
        finally:
            server.terminate()
            server.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--updates", type=int, default=800)
    parser.add_argument(
        "--sign-file",
        action="store_true",
        help="run the sign with a sign file naming the tables and their paytable (--config)",
    )
    args = parser.parse_args()
    result = asyncio.run(measure(args.pages, args.updates, args.sign_file))
    print(json.dumps(result))
    ok = result["delivered_to_every_page"] and float(result["rss_pages_mb"]) <= 60
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
