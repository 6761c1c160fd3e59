"""Hostile bytes on a socket or in a file stop no process: the control socket (both ends),
``progressivectl sign`` and ``progressivectl sign --web``, ``progressivectl simulate``.

Real processes throughout: the table daemon with its control socket, the signs against a
real Mosquitto on a free loopback port, the command line as an operator runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from progressived.engine.simulate import MAX_LINE
from progressived.runtime.control import MAX_REQUEST
from progressived.testing.broker import Mosquitto
from tests.daemon_harness import METER_TOPIC, TABLE, table
from tests.test_cli_faults import CTL, one_line
from tests.websign_harness import WebSign

DEEP = b"[" * 1500 + b"]" * 1500


def raw_exchange(path: Path, data: bytes) -> bytes:
    """Send ``data`` as it is on the control socket; what the daemon answers before closing."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(str(path))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def ctl_status(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CTL, "status", "--socket", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.e2e
async def test_the_control_socket_answers_junk_with_a_code_and_the_daemon_goes_on(
    tmp_path: Path,
) -> None:
    async with table(tmp_path) as t:
        t.start_daemon()
        await t.online()
        sock = tmp_path / "control.sock"
        cases = {
            DEEP + b"\n": "too-deep",
            b"[" * 100_000 + b"\n": "too-large",  # over MAX_REQUEST before any newline
            b'{"action": "status", "pad": "' + b"x" * MAX_REQUEST + b'"}\n': "too-large",
            b'{"action": "st\xffatus"}\n': "not-utf8",
            b'{"action": "status", "action": "close"}\n': "not-json",
            b'{"action": "status", "amount": NaN}\n': "not-json",
            b'["status"]\n': "not-object",
        }
        for data, code in cases.items():
            answer = await asyncio.to_thread(raw_exchange, sock, data)
            assert answer.endswith(b"\n") and answer.count(b"\n") == 1, answer[:200]
            got = json.loads(answer)
            assert (got["ok"], got["code"]) == (False, code), got
            assert got["error"].startswith("bad request: ")
            assert t.proc is not None and t.proc.poll() is None
        status = await asyncio.to_thread(ctl_status, sock)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["ok"] is True
        lines = [line for line in t.log_text().splitlines() if "control request refused" in line]
        assert len(lines) == 5, lines  # one per code (a minute): too-large and not-json twice
        assert "Traceback" not in t.log_text()


@contextlib.asynccontextmanager
async def fake_daemon(path: Path, answer: bytes) -> AsyncIterator[None]:
    """A control socket that answers every request with ``answer`` (a broken or hostile
    process where the daemon's socket should be)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(answer)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(serve, path=str(path))
    try:
        yield
    finally:
        server.close()
        await server.wait_closed()


async def test_the_client_refuses_a_hostile_answer_in_one_line(tmp_path: Path) -> None:
    sock = tmp_path / "control.sock"
    for answer, words in (
        (DEEP + b"\n", "too-deep"),
        (b'{"ok": true, "status": "' + b"x" * (5 * 1024 * 1024) + b'"}\n', "too-large"),
        (b"", "without an answer"),
        (b"\xff\xfe\n", "not-utf8"),
    ):
        async with fake_daemon(sock, answer):
            done = await asyncio.to_thread(ctl_status, sock)
        assert done.returncode == 2, done.stderr
        assert words in one_line(done)


async def publish(port: int, *messages: tuple[str, bytes], retain: bool = False) -> None:
    async with aiomqtt.Client("127.0.0.1", port) as client:
        for topic, payload in messages:
            await client.publish(topic, payload, qos=1, retain=retain)


def meter(cents: int, seq: int) -> bytes:
    return json.dumps(
        {
            "cents": cents,
            "display": f"${cents // 100:,}.{cents % 100:02d}",
            "meter": "main",
            "seq": seq,
            "state": "open",
            "table": TABLE,
        }
    ).encode()


JUNK = (
    DEEP,
    b"[" * 100_000 + b"]" * 100_000,
    b'{"cents": 1, "pad": "' + b"x" * 70_000 + b'"}',
    b"\xff\xfe\xfd",
    b'{"cents": ' + b"9" * 5000 + b', "seq": 99}',
)


def junk_messages() -> list[tuple[str, bytes]]:
    topics = (METER_TOPIC, f"progressive/table/{TABLE}/status", f"progressive/table/{TABLE}/event")
    return [(topic, payload) for topic in topics for payload in JUNK]


async def test_junk_does_not_end_the_terminal_sign(mosquitto: Mosquitto) -> None:
    proc = await asyncio.create_subprocess_exec(
        *CTL, "sign", "--port", str(mosquitto.port), "--table", TABLE, "--plain",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    try:
        async with asyncio.timeout(30):
            while b"connected; waiting" not in await proc.stderr.readline():
                pass
            await publish(mosquitto.port, (METER_TOPIC, meter(100_045, 5)))
            assert await proc.stdout.readline() == b"main $1,000.45 OPEN\n"
            await publish(mosquitto.port, *junk_messages(), (METER_TOPIC, meter(100_077, 6)))
            # The junk changed nothing on the screen; the next good value is drawn.
            assert await proc.stdout.readline() == b"main $1,000.77 OPEN\n"
            said = await proc.stderr.readline()
        assert said.startswith(b"sign: ignored a malformed message on ")
        assert proc.returncode is None
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await asyncio.wait_for(proc.wait(), 30)
    rest = (await proc.stderr.read()).decode()
    assert "ignored a malformed message" not in rest  # one line in 10 s, however many
    assert "Traceback" not in rest


def state(sign: WebSign) -> dict[str, Any]:
    with urllib.request.urlopen(sign.url("/state.json"), timeout=5) as response:
        found: dict[str, Any] = json.loads(response.read())
    return found


def shown_cents(sign: WebSign) -> int | None:
    for source in state(sign)["sources"]:
        if source["key"] == f"table/{TABLE}":
            for m in source["meters"]:
                if m["meter"] == "main":
                    return int(m["cents"])
    return None


async def wait_shown(sign: WebSign, cents: int) -> None:
    async with asyncio.timeout(20):
        while await asyncio.to_thread(shown_cents, sign) != cents:
            assert sign.proc is not None and sign.proc.poll() is None, "the web sign stopped"
            await asyncio.sleep(0.1)


@pytest.mark.e2e
async def test_junk_does_not_end_the_web_sign(mosquitto: Mosquitto, tmp_path: Path) -> None:
    sign = await WebSign(mosquitto.port, tmp_path, args=("--table", TABLE)).start()
    try:
        # Retained, as a controller's meter is: the sign may subscribe after it is sent.
        await publish(mosquitto.port, (METER_TOPIC, meter(100_045, 5)), retain=True)
        await wait_shown(sign, 100_045)  # subscribed: what follows reaches it
        await publish(mosquitto.port, *junk_messages(), (METER_TOPIC, meter(100_077, 6)))
        await wait_shown(sign, 100_077)
        assert sign.proc is not None and sign.proc.poll() is None
    finally:
        assert sign.stop() == 0
    log = (tmp_path / "websign-1.log").read_text()
    assert log.count("ignored a malformed message") == 1, log
    assert "Traceback" not in log


def simulate(script: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CTL, "simulate", "--paytable", "tcp-sd-1", "--script", str(script), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_simulate_refuses_a_script_that_is_not_text_and_rejects_an_endless_line(
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.txt"
    script.write_bytes(b"bet 1\nlock\n\xff\xfe bet 2\n")
    done = simulate(script)
    assert done.returncode == 2
    assert "not UTF-8" in one_line(done) and "line 3" in one_line(done)

    script.write_bytes(b"bet 1\n" + b"bet 2 " * 100_000 + b"\nlock\nreconcile\n")
    done = simulate(script, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    (rejected,) = report["rejected"]
    assert rejected["line"] == 2 and len(rejected["text"]) < 100
    assert rejected["reason"] == f"a line of 600,000 characters (at most {MAX_LINE})"
    assert report["rounds"][0]["state"] == "reconciled"
