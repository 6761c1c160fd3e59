"""Every address the product listens on: a taken one is one line naming it and exit 7,
before anything is journaled; a control socket is never taken from a live daemon, a stale
one is replaced, and a stopping daemon removes only the socket it made itself.

Real sockets, real `progressived run`/`link` processes (SIGKILLed where a crash is the
point), and the in-process control server on a real Unix socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from progressived.demo import table as demo
from progressived.runtime.control import ControlServer, Peer, request
from progressived.runtime.listen import ListenError
from progressived.testing.broker import free_port
from progressived.testing.waits import until_sync
from tests.test_cli_faults import CTL, DAEMON, config, one_line, run
from tests.test_start_checks import init, link_config


@contextlib.contextmanager
def taken_port() -> Iterator[int]:
    """A loopback port another process (this test) is listening on."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


def rows(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return int(conn.execute("SELECT count(*) FROM journal").fetchone()[0])


def with_metrics(cfg: Path, port: int) -> None:
    text = cfg.read_text().replace("enabled = false", f'address = "127.0.0.1"\nport = {port}')
    cfg.write_text(text)


@pytest.mark.e2e
def test_the_tables_metrics_port_taken_is_one_line_and_7(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    init(cfg)
    before = rows(tmp_path / "ledger.db")
    with taken_port() as port:
        with_metrics(cfg, port)
        result = run(*DAEMON, "run", "--config", str(cfg))
    assert result.returncode == 7
    line = one_line(result)
    assert line.startswith(f"progressived: cannot listen on 127.0.0.1:{port} for metrics: ")
    assert "Address already in use" in line and "[metrics]" in line
    assert rows(tmp_path / "ledger.db") == before  # no daemon_started: it never started
    assert not (tmp_path / "control.sock").exists()  # the socket it claimed is gone again


@pytest.mark.e2e
def test_the_links_metrics_port_taken_is_one_line_and_7(tmp_path: Path) -> None:
    cfg = link_config(tmp_path)
    init(cfg)
    before = rows(tmp_path / "ledger.db")
    with taken_port() as port:
        with_metrics(cfg, port)
        result = run(*DAEMON, "link", "--config", str(cfg))
    assert result.returncode == 7
    line = one_line(result)
    assert line.startswith(f"progressived link: cannot listen on 127.0.0.1:{port} for metrics: ")
    assert rows(tmp_path / "ledger.db") == before
    assert not (tmp_path / "link.sock").exists()


# ------------------------------------------------------------ the control server in process


async def _answer(request: Any, peer: Peer) -> dict[str, Any]:
    return {"ok": True, "who": request.get("who")}


def ask(path: Path) -> dict[str, Any]:
    return request(path, {"who": "test"}, timeout=5)


async def test_a_live_socket_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "control.sock"
    first = ControlServer(path, None, _answer)
    await first.start()
    second = ControlServer(path, None, _answer)
    with pytest.raises(ListenError, match="a running process answers there"):
        second.claim()
    await second.stop()  # a refused server has nothing to remove
    assert (await asyncio.to_thread(ask, path))["ok"] is True
    await first.stop()
    assert not path.exists()


async def test_a_stale_socket_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "control.sock"
    with socket.socket(socket.AF_UNIX) as dead:  # bound, never listened: as after a SIGKILL
        dead.bind(str(path))
    server = ControlServer(path, None, _answer)
    await server.start()
    assert (await asyncio.to_thread(ask, path))["ok"] is True
    await server.stop()
    assert not path.exists()


async def test_stop_removes_only_its_own_socket(tmp_path: Path) -> None:
    """First's file is removed behind its back and second binds the path: whichever
    stops first, each removes only what it made."""
    path = tmp_path / "control.sock"
    first = ControlServer(path, None, _answer)
    await first.start()
    path.unlink()
    second = ControlServer(path, None, _answer)
    await second.start()
    await first.stop()
    assert (await asyncio.to_thread(ask, path))["ok"] is True  # second's, untouched
    await second.stop()
    assert not path.exists()


async def test_a_refused_client_that_sends_late_reads_why_not_a_broken_pipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A peer outside the group is refused; the daemon reads its request first. Answering
    and closing before it was read made a client that sent a moment later fail its send
    with a broken pipe (seen in the suite as `progressivectl` run as nobody)."""
    path = tmp_path / "control.sock"
    refused: list[str] = []

    async def on_refused(peer: Peer, why: str) -> None:
        refused.append(why)

    server = ControlServer(path, None, _answer, on_refused)
    monkeypatch.setattr(server, "authorized", lambda peer: False)
    await server.start()

    def late_client() -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(path))
            time.sleep(0.3)  # the client is slow to send; the daemon has had time to answer
            sock.sendall(b'{"action": "status"}\n')  # a broken pipe here, before the fix
            return sock.makefile("rb").readline().decode()

    try:
        answer = json.loads(await asyncio.to_thread(late_client))
    finally:
        await server.stop()
    assert answer["ok"] is False and "permission denied" in answer["error"], answer
    assert len(refused) == 1


async def test_a_file_that_is_not_a_socket_is_never_removed(tmp_path: Path) -> None:
    path = tmp_path / "control.sock"
    path.write_text("an operator's notes\n")
    with pytest.raises(ListenError, match="not a socket"):
        ControlServer(path, None, _answer).claim()
    assert path.read_text() == "an operator's notes\n"


# ------------------------------------------------------------ two daemons, one socket


class Daemon:
    """`progressived run` as a process, its log in a file."""

    def __init__(self, cfg: Path, log: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*DAEMON, "run", "--config", str(cfg)], stdout=out, stderr=subprocess.STDOUT
            )

    def wait_for(self, text: str, timeout: float = 60) -> None:
        """Until ``text`` is in the log (the daemon logged it); fails if it exits first."""

        def logged() -> bool:
            if text in self.log.read_text(errors="replace"):
                return True
            assert self.proc.poll() is None, self.log.read_text(errors="replace")
            return False

        until_sync(logged, f"{text!r} in {self.log}", timeout)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)


def table_at(sock: Path) -> str:
    """The table whose daemon answers on ``sock`` (`progressivectl status --json`)."""
    done = subprocess.run(
        [*CTL, "status", "--json", "--socket", str(sock)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["status"]["table"])


def second_table(tmp: Path, sock: Path) -> Path:
    (tmp / "b").mkdir()
    cfg = config(tmp / "b", table="t-2")
    cfg.write_text(cfg.read_text().replace(str(tmp / "b" / "control.sock"), str(sock)))
    init(cfg)
    return cfg


@pytest.mark.e2e
def test_a_second_daemon_on_a_live_socket_refuses_and_takes_a_dead_ones(tmp_path: Path) -> None:
    sock = tmp_path / "control.sock"
    cfg_a = config(tmp_path)
    init(cfg_a)
    cfg_b = second_table(tmp_path, sock)
    a = Daemon(cfg_a, tmp_path / "a.log")
    try:
        a.wait_for('"event": "running"')
        a.wait_for('"event": "control socket"')
        assert table_at(sock) == "t-1"

        before = rows(tmp_path / "b" / "ledger.db")
        refused = run(*DAEMON, "run", "--config", str(cfg_b))
        assert refused.returncode == 7
        assert one_line(refused) == (
            f"progressived: cannot listen on the control socket {sock}: a running process "
            "answers there (another daemon with the same [control] socket?); not removing it"
        )
        assert rows(tmp_path / "b" / "ledger.db") == before  # it journaled nothing
        assert table_at(sock) == "t-1"  # A's socket is still there and A's

        assert a.stop(signal.SIGKILL) == -signal.SIGKILL
        assert sock.exists()  # a crash leaves its socket: stale now
        b = Daemon(cfg_b, tmp_path / "b.log")
        try:
            b.wait_for('"event": "control socket"')
            assert "stale control socket removed" in b.log.read_text()
            assert table_at(sock) == "t-2"
        finally:
            assert b.stop() == 0
        assert not sock.exists()
    finally:
        if a.proc.poll() is None:
            a.stop(signal.SIGKILL)


@pytest.mark.e2e
def test_a_stopping_daemon_leaves_the_socket_another_one_made(tmp_path: Path) -> None:
    sock = tmp_path / "control.sock"
    cfg_a = config(tmp_path)
    init(cfg_a)
    cfg_b = second_table(tmp_path, sock)
    a = Daemon(cfg_a, tmp_path / "a.log")
    b: Daemon | None = None
    try:
        a.wait_for('"event": "control socket"')
        sock.unlink()  # removed behind A's back (an operator, a cleanup script)
        b = Daemon(cfg_b, tmp_path / "b.log")
        b.wait_for('"event": "control socket"')
        assert a.stop() == 0
        assert table_at(sock) == "t-2"  # A's stop left B's socket alone
        assert b.stop() == 0
        assert not sock.exists()
    finally:
        for d in (a, b):
            if d is not None and d.proc.poll() is None:
                d.stop(signal.SIGKILL)


# ------------------------------------------------------------ the demo


@pytest.mark.e2e
def test_the_demo_ends_with_the_daemons_line_when_it_cannot_listen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The port the demo chose for metrics is taken before the daemon binds it: the demo
    says why and exits with the daemon's status, at once, not after a 30 s wait."""
    with taken_port() as port:
        ports = iter([port, free_port()])
        monkeypatch.setattr(demo, "free_port", lambda: next(ports))
        started = time.monotonic()
        status = demo.run_demo(headless=True, rounds=1, workdir=tmp_path / "demo")
        took = time.monotonic() - started
    assert status == 7
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"progressived demo: the daemon stopped (status 7): cannot listen on 127.0.0.1:{port} "
        "for metrics: Address already in use (another process has the port? set [metrics] "
        "address and port, or enabled = false)"
    )
    assert took < 25, took


@pytest.mark.e2e
def test_the_demo_says_when_its_web_sign_cannot_listen_and_plays_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    screen = io.StringIO()
    with taken_port() as port:
        ports = iter([free_port(), port])  # metrics, then the web sign's
        monkeypatch.setattr(demo, "free_port", lambda: next(ports))
        status = demo.run_demo(headless=True, rounds=1, workdir=tmp_path / "demo", out=screen)
    out = screen.getvalue()
    assert status == 0, out
    assert f"web sign stopped (status 2): sign: cannot listen on 127.0.0.1:{port}: " in out
    assert "rounds reconciled: 1 of 1" in out
