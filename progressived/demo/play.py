"""The demo while it plays: its processes, the sign it watches, the script and the typing.

Why a module of its own: :mod:`progressived.demo.table` prepares (broker, config, ledger, banner)
and cleans up (Ctrl-C, SIGTERM, the working directory); this module runs the board
simulator, the web sign and the daemon as child processes, tees their output to their logs
and the screen, subscribes as a sign does and drives the scripted rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import aiomqtt

from progressived.core.wirejson import MAX_MESSAGE, WireError, loads_object
from progressived.demo.console import daemon_problem, narrate, tee_lines
from progressived.demo.script import ROUNDS, await_reconciled, forward_typing, play_script
from progressived.signs.screen import Screen
from progressived.signs.terminal import SignView
from progressived.testing.rig import PROGRESSIVECTL, PROGRESSIVED

TABLE = "demo-1"
# The web sign's file (docs/sign.md): the names players read and the table's paytable.
SIGN_FILE = f"""# written by progressived demo (docs/sign.md)
[sign]
banner_s = 30

[[sign.tables]]
id = "{TABLE}"
name = "Demo Table"
paytable = "tcp-sd-1"
"""


def _sign_file(work: Path) -> Path:
    path = work / "sign.toml"
    path.write_text(SIGN_FILE)
    return path


@contextlib.contextmanager
def _process(cmd: list[str], **kwargs: Any) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(cmd, text=True, **kwargs)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class DaemonStopped(RuntimeError):
    """The daemon exited while the demo needed it (its own line says why)."""

    def __init__(self, status: int, line: str) -> None:
        super().__init__(f"the daemon stopped (status {status}): {line}")
        self.status = status


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


async def _watch(
    host: str,
    port: int,
    view: SignView,
    events: list[dict[str, Any]],
    screen: Screen,
    plain: bool,
) -> None:
    """Subscribe as a sign does: the sign frame and, in words, each table event."""
    async with aiomqtt.Client(host, port) as client:
        await client.subscribe(f"progressive/table/{TABLE}/#", qos=1)
        async for message in client.messages:
            payload = message.payload
            if not isinstance(payload, (bytes, bytearray)):
                continue
            topic = str(message.topic)
            event: dict[str, Any] | None = None
            if topic.endswith("/event"):
                with contextlib.suppress(WireError):  # the sign says why (docs/mqtt.md)
                    event = loads_object(payload, max_bytes=MAX_MESSAGE)
            if event is not None:
                if any(e.get("seq") == event.get("seq") for e in events[-50:]):
                    continue  # the same event delivered again after a reconnect
                events.append(event)
            if view.receive(topic, bytes(payload)):
                screen.sign(view.plain() if plain else view.render())
            said = narrate(event) if event is not None else None
            if said:
                screen.say(said)


def _last_line(log: Path, prog: str = "progressived: ") -> str:
    """A child's last line: an expected fault's one line (``progressived: ...``)."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].removeprefix(prog) if lines else "no output"


def _join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=5)


# The sign watcher's event loop while the demo plays: a Ctrl-C that lands while it runs
# leaves the MQTT client's tasks pending, and at exit they (and the client's socket
# callbacks into a closed loop) would print tracebacks.
_OPEN_LOOPS: list[asyncio.AbstractEventLoop] = []


def close_loops() -> None:
    """Cancel what an interrupted loop still runs (the MQTT client disconnects), close it."""
    while _OPEN_LOOPS:
        loop = _OPEN_LOOPS.pop()
        if loop.is_closed():
            continue
        # The broker got the same SIGINT: the client's teardown errors say nothing new.
        loop.set_exception_handler(lambda _loop, _context: None)
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        with contextlib.suppress(BaseException):
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        with contextlib.suppress(BaseException):
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def play(
    work: Path,
    config: Path,
    host: str,
    port: int,
    headless: bool,
    rounds: int,
    screen: Screen,
    web_port: int,
) -> int:
    said: queue.Queue[str] = queue.Queue()  # lines from the output threads, drawn by this one
    interactive = threading.Event()
    threads: list[threading.Thread] = []
    with contextlib.ExitStack() as stack:
        sim_log = stack.enter_context((work / "board.log").open("w"))
        daemon_log = stack.enter_context((work / "daemon.log").open("w"))
        # Unwound in reverse: the processes stop, their last lines reach the logs, then the
        # logs close.
        stack.callback(_join, threads)
        sim = _start_board(stack, work, sim_log, said, interactive, threads)
        web = _start_web(stack, work, port, web_port)
        with _process(
            [*PROGRESSIVED, "run", "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            bufsize=1,
        ) as daemon:
            assert daemon.stdout is not None
            daemon_tee = tee_lines(
                daemon.stdout, daemon_log, daemon_problem, said.put, threading.Lock()
            )
            threads.append(daemon_tee)
            live = _Live(
                work=work,
                screen=screen,
                said=said,
                sim=sim,
                web=web,
                daemon=daemon,
                daemon_tee=daemon_tee,
                watch=(host, port, headless),
            )
            return live.run(headless, rounds, interactive)


def _start_board(
    stack: contextlib.ExitStack,
    work: Path,
    sim_log: TextIO,
    said: queue.Queue[str],
    interactive: threading.Event,
    threads: list[threading.Thread],
) -> subprocess.Popen[str]:
    """The board simulator on its pty, its output teed to board.log and the screen."""
    log_lock = threading.Lock()
    link = work / "board"
    sim_cmd = [*PROGRESSIVECTL, "simulate-board", "--link", str(link), "--seats", "7"]
    sim_cmd += ["--heartbeat", "0.5"]
    pipes: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "bufsize": 1}
    sim = stack.enter_context(_process(sim_cmd, stdin=subprocess.PIPE, **pipes))
    assert sim.stdin is not None
    assert sim.stdout is not None
    assert sim.stderr is not None

    def board_answer(line: str) -> str | None:
        # The lights change with every bet and key; during the script they would crowd
        # out the narration, so they are shown once someone is typing.
        if line.startswith("lights") and not interactive.is_set():
            return None
        return f"board: {line}"

    threads.append(tee_lines(sim.stdout, sim_log, board_answer, said.put, log_lock))

    def board_error(line: str) -> str:
        return f"board error: {line.removeprefix('stdin: ')}"

    threads.append(tee_lines(sim.stderr, sim_log, board_error, said.put, log_lock))
    _wait_for(link.exists, 20, "the board simulator's pty")
    return sim


def _start_web(
    stack: contextlib.ExitStack, work: Path, port: int, web_port: int
) -> subprocess.Popen[str]:
    """The web sign (docs/sign.md) for the banner's URL; its lines go to websign.log."""
    web_log = stack.enter_context((work / "websign.log").open("w"))
    web_cmd = [*PROGRESSIVECTL, "sign", "--web", "--port", str(port), "--table", TABLE]
    web_cmd += ["--listen", f"127.0.0.1:{web_port}", "--config", str(_sign_file(work))]
    return stack.enter_context(_process(web_cmd, stdout=web_log, stderr=subprocess.STDOUT))


class _Live:
    """The demo while the daemon runs: the sign watcher's event loop pumped between steps,
    the children watched, the script played and then the typing forwarded to the board."""

    def __init__(
        self,
        *,
        work: Path,
        screen: Screen,
        said: queue.Queue[str],
        sim: subprocess.Popen[str],
        web: subprocess.Popen[str],
        daemon: subprocess.Popen[str],
        daemon_tee: threading.Thread,
        watch: tuple[str, int, bool],  # the broker's host and port; plain frames (headless)
    ) -> None:
        self.work, self.screen, self.said = work, screen, said
        self.sim, self.web, self.daemon, self.daemon_tee = sim, web, daemon, daemon_tee
        self.web_told = threading.Event()
        self.view = SignView("progressive", "main", TABLE)
        self.events: list[dict[str, Any]] = []
        self.loop = asyncio.new_event_loop()
        host, port, plain = watch
        self.watcher = self.loop.create_task(
            _watch(host, port, self.view, self.events, screen, plain=plain)
        )
        _OPEN_LOOPS.append(self.loop)  # for a Ctrl-C: see close_loops

    def pump(self, seconds: float) -> None:
        self.loop.run_until_complete(asyncio.sleep(seconds))
        if self.watcher.done() and self.watcher.exception():
            raise RuntimeError(f"sign subscriber failed: {self.watcher.exception()}")
        self.children()
        while not self.said.empty():
            self.screen.say(self.said.get_nowait())
        self.screen.draw()

    def children(self) -> None:
        """A stopped web sign is told once (the demo plays on without its page); a
        stopped daemon ends the demo with its own line and status."""
        if (gone := self.web.poll()) is not None and not self.web_told.is_set():
            self.web_told.set()
            line = _last_line(self.work / "websign.log", "progressivectl ")
            self.said.put(f"web sign stopped (status {gone}): {line}")
        if (status := self.daemon.poll()) is not None:
            self.daemon_tee.join(timeout=5)  # its last lines reach daemon.log
            raise DaemonStopped(status, _last_line(self.work / "daemon.log"))

    def type_line(self, line: str) -> None:
        assert self.sim.stdin is not None
        try:
            self.sim.stdin.write(line.rstrip("\n") + "\n")
            self.sim.stdin.flush()
        except (BrokenPipeError, ValueError):  # after `quit`: the simulator is gone
            self.said.put("board error: the board simulator has stopped; Ctrl-C ends the demo")

    def online(self) -> bool:
        self.pump(0.1)
        return any(e.get("kind") == "board_online" for e in self.events)

    def run(self, headless: bool, rounds: int, interactive: threading.Event) -> int:
        """The script (``rounds`` of it when headless), then the typing until Ctrl-C."""
        screen, pump = self.screen, self.pump
        try:
            _wait_for(self.online, 30, "the daemon to see the board")
            count = rounds if headless else len(ROUNDS)
            played = play_script(count, self.type_line, pump, screen)
            reconciled = await_reconciled(self.events, played, pump)
            screen.say(f"rounds reconciled: {reconciled} of {played}; meter {self.view.display}")
            pump(0)
            if headless:
                return 0 if reconciled >= played else 1
            interactive.set()
            forward_typing(self.type_line, pump, screen)
            return 0
        finally:
            self.watcher.cancel()
            with contextlib.suppress(BaseException):
                self.loop.run_until_complete(self.watcher)
            self.loop.close()
