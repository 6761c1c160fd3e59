"""The metrics endpoint's HTTP server holds against slow and hostile clients
(progressived/runtime/metrics_http.py, docs/operations.md "Metrics").

prometheus_client's own server made a thread per connection and waited on each for ever:
900 clients that sent nothing made 904 threads, and at 1,012 the daemon had no descriptor
left for its control socket or its broker. Here: the real daemon flooded with more slow
clients than the server's cap keeps its thread and descriptor counts, answers on its
control socket and to a scrape from another address, closes the slow ones after the
request time limit and says so in a few lines; in process, the server that the daemon and
the link controller use answers what prometheus_client answers and refuses, with one line
per kind, a head too large, a request that is not HTTP and a client that does not read.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import re
import resource
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry
from structlog.testing import capture_logs

from progressived.daemon.metrics import TableMetrics
from progressived.runtime import metrics_http
from progressived.runtime.control import request
from progressived.runtime.metrics_http import MAX_CONNECTIONS, MAX_PER_CLIENT, MetricsServer
from progressived.testing.broker import free_port
from progressived.testing.waits import until, until_sync
from tests.daemon_harness import table

FLOOD = 200  # slow clients: well over MAX_CONNECTIONS (64)
HOSTS = [f"127.0.0.{n}" for n in range(2, 2 + 40)]  # 40 addresses x 5: over the cap in total


def scrape(port: int, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    url = f"http://127.0.0.1:{port}/metrics"
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=10) as response:
        return response.status, dict(response.headers.items()), response.read()


def connect(port: int, source: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    sock.setblocking(False)
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    """The server closed (or reset) it: what it sent, if anything, read and thrown away."""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


async def trickle(socks: list[socket.socket], stop: asyncio.Event) -> None:
    """A byte at a time, twice a second, of a request head that never ends."""
    while not stop.is_set():
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.send(b"X")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)


def proc_counts(pid: int) -> tuple[int, int]:
    """The process's threads and open descriptors, as the kernel counts them."""
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^Threads:\s+(\d+)", status, re.MULTILINE)
    assert found is not None
    return int(found.group(1)), len(list(Path(f"/proc/{pid}/fd").iterdir()))


def metrics_warnings(log: str) -> list[dict[str, Any]]:
    out = []
    for line in log.splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(re.sub(r"^<\d>", "", line))
            if entry.get("logger") == "progressived.metrics" or str(
                entry.get("event", "")
            ).startswith("metrics "):
                out.append(entry)
    return out


@pytest.mark.e2e
async def test_a_flood_of_slow_clients_costs_the_daemon_no_thread_and_a_bounded_share(
    tmp_path: Path,
) -> None:
    port = free_port()
    async with table(tmp_path, metrics_port=str(port)) as t:
        t.start_daemon()
        await t.online()
        await asyncio.to_thread(scrape, port)  # the server is up and warm
        threads0, fds0 = proc_counts(t.pid)
        control = t.tmp / "control.sock"
        opened: list[socket.socket] = []
        held: list[socket.socket] = []  # those that trickle
        stop = asyncio.Event()
        trickling = asyncio.create_task(trickle(held, stop))
        try:
            # One address, FLOOD connections, half of them trickling: MAX_PER_CLIENT held,
            # the rest refused at once; a scrape from another address is answered.
            one = [connect(port, "127.0.0.2") for _ in range(FLOOD)]
            opened += one
            held += one[::2]
            status, _, body = await asyncio.to_thread(scrape, port)
            assert status == 200 and b"progressive_board_online" in body
            # Then FLOOD from 40 addresses: the server is full, MAX_CONNECTIONS at most.
            many = [connect(port, HOSTS[n % len(HOSTS)]) for n in range(FLOOD)]
            opened += many
            held += many[::2]
            answer = await asyncio.to_thread(request, control, {"action": "status"}, 10)
            assert answer["ok"], answer
            threads, fds = proc_counts(t.pid)
            assert threads <= threads0 + 1, (threads0, threads)  # not one per connection
            assert fds <= fds0 + MAX_CONNECTIONS + 4, (fds0, fds)
            # Every slow client is closed by the server (the request time limit) ...
            await until(
                lambda: all(closed_by_server(s) for s in opened), "every slow client closed", 60
            )
            # ... and the server answers again, to anyone.
            status, _, body = await asyncio.to_thread(scrape, port)
            assert status == 200 and b"progressive_board_online" in body
            threads, fds = proc_counts(t.pid)
            assert threads <= threads0 + 1 and fds <= fds0 + 4, (threads0, threads, fds0, fds)
        finally:
            stop.set()
            await trickling
            for sock in opened:
                sock.close()
        said = metrics_warnings(t.log_text())
        kinds = {entry["kind"] for entry in said}
        assert {"client_full", "server_full", "slow"} <= kinds, said
        assert len(said) <= 2 * len(metrics_http.BadRequest), said  # a line per kind, not each
        assert not [line for line in t.log_text().splitlines() if "Traceback" in line]


# ------------------------------------------------------------------ the server in process


@contextlib.contextmanager
def serving(registry: CollectorRegistry, **limits: Any) -> Iterator[MetricsServer]:
    server = MetricsServer(registry, "127.0.0.1", 0, **limits)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def raw(port: int, data: bytes) -> bytes:
    """Send ``data``, read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    return b"".join(chunks)


def test_the_exposition_is_prometheus_clients_own() -> None:
    metrics = TableMetrics("t-1")
    port = metrics.serve("127.0.0.1", 0)
    try:
        status, headers, body = scrape(port)
        assert status == 200
        assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert body == generate_latest(metrics.registry)
        _, headers, body = scrape(
            port, {"Accept": "application/openmetrics-text", "Accept-Encoding": "gzip"}
        )
        assert headers["Content-Type"].startswith("application/openmetrics-text")
        assert gzip.decompress(body).endswith(b"# EOF\n")
        refused = raw(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert refused.startswith(b"HTTP/1.1 405 ")  # as prometheus_client answers
    finally:
        metrics.stop_serving()


def test_bad_requests_are_refused_with_a_code_and_one_line_per_kind() -> None:
    registry = CollectorRegistry()
    with capture_logs() as logs, serving(registry) as server:
        for _ in range(5):
            assert raw(server.port, b"A" * 10_000).startswith(b"HTTP/1.1 431 ")
            assert raw(server.port, b"hello there\r\n\r\n").startswith(b"HTTP/1.1 400 ")
            assert raw(server.port, b"GET / HTTP/1.1\r\nno colon\r\n\r\n").startswith(
                b"HTTP/1.1 400 "
            )
    said = [entry for entry in logs if entry["log_level"] == "warning"]
    assert [entry["kind"] for entry in said] == ["too_large", "malformed"], said
    assert server.refused[metrics_http.BadRequest.TOO_LARGE] == 5
    assert server.refused[metrics_http.BadRequest.MALFORMED] == 10


class Big(Collector):
    """An exposition larger than any socket buffer (a client that does not read stalls)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("big", "A large exposition.", labels=["n"])
        for n in range(100_000):
            family.add_metric([f"{n:064d}"], n)
        yield family


async def test_a_client_that_does_not_read_its_answer_is_closed() -> None:
    registry = CollectorRegistry()
    registry.register(Big())
    with capture_logs() as logs, serving(registry, response_timeout_s=0.5) as server:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
        await until(lambda: server.refused[metrics_http.BadRequest.STALLED] == 1, "stalled")
        await until(lambda: server.open == 0, "the connection closed")
        sock.close()
    assert [e["kind"] for e in logs if e["log_level"] == "warning"] == ["stalled"]


def test_a_slow_client_is_closed_and_its_place_given_back() -> None:
    registry = CollectorRegistry()
    with serving(registry, request_timeout_s=0.2, max_per_client=MAX_PER_CLIENT) as server:
        socks = [connect(server.port, "127.0.0.3") for _ in range(MAX_PER_CLIENT + 3)]
        try:
            until_sync(lambda: all(closed_by_server(s) for s in socks), "all closed", 30)
            assert server.refused[metrics_http.BadRequest.CLIENT_FULL] >= 3
            assert server.refused[metrics_http.BadRequest.SLOW] >= 1
            until_sync(lambda: server.open == 0, "none open")
            assert scrape(server.port)[0] == 200
        finally:
            for sock in socks:
                sock.close()


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one() -> None:
    """systemd's default soft limit is 1024 whatever the hard one; the process takes its hard
    one when its metrics endpoint starts (the units set both with LimitNOFILE)."""

    def lower() -> None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    code = (
        "import resource; from progressived.runtime.listen import raise_open_files_limit as r;"
        "before = resource.getrlimit(resource.RLIMIT_NOFILE)[0]; r();"
        "print(before, *resource.getrlimit(resource.RLIMIT_NOFILE))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], preexec_fn=lower, capture_output=True, text=True, timeout=60
    )
    before, soft, hard = (int(word) for word in done.stdout.split())
    assert before == 256 and soft == hard, done.stdout + done.stderr
