"""``progressived demo``: the whole product on one machine, started with one command.

It starts, each as its own process as on a real table: an MQTT broker on a free loopback
port (the system's Mosquitto, or the embedded amqtt broker from the ``broker`` extra), the
board simulator on a pseudo-terminal (``progressivectl simulate-board``), the daemon
(``progressived run``), and a sign subscribed to the broker. It plays scripted rounds
(progressived/demo_script.py) — a tray pay, a 100% jackpot confirmed by the supervisor with
envy, a second envy hand, a keying mistake turned off — narrating each event, then either
exits (``--headless``) or forwards what you type to the board simulator until Ctrl-C or the
end of input, showing the simulator's answers and errors and the daemon's refusals and
warnings (they also go to board.log and daemon.log). On a terminal the screen is redrawn in
place; otherwise it is appended as plain text. The start banner names the control socket and
the working directory; at exit it says whether that directory was removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

import aiomqtt

from progressived.broker import (
    BrokerUnavailable,
    Mosquitto,
    find_mosquitto,
    free_port,
    wait_for_port,
)
from progressived.demo_console import daemon_problem, narrate, tee_lines
from progressived.demo_script import ROUNDS, await_reconciled, forward_typing, play_script
from progressived.sign import SignView
from progressived.sign_screen import Screen, is_terminal
from progressived.testing.config import RigConfig, write_config
from progressived.testing.rig import PROGRESSIVECTL, PROGRESSIVED

TABLE = "demo-1"


class AmqttBroker:
    """The embedded fallback broker, run as a process like Mosquitto."""

    def __init__(self, workdir: Path) -> None:
        self.host = "127.0.0.1"
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> AmqttBroker:
        exe = shutil.which("amqtt") or str(Path(sys.executable).with_name("amqtt"))
        if not os.access(exe, os.X_OK):
            raise BrokerUnavailable(
                "no MQTT broker: install Mosquitto ('sudo apt-get install mosquitto') or the "
                "embedded broker ('pip install progressived[broker]')"
            )
        conf = self.workdir / "amqtt.yaml"
        conf.write_text(
            "listeners:\n  default:\n    type: tcp\n"
            f"    bind: {self.host}:{self.port}\n"
            "plugins:\n  amqtt.plugins.authentication.AnonymousAuthPlugin:\n"
            "    allow_anonymous: true\n"
        )
        self.proc = subprocess.Popen(
            [exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port(self.host, self.port, timeout=20)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            if self.proc.poll() is None:
                self.proc.kill()


def start_broker(workdir: Path) -> Mosquitto | AmqttBroker:
    """The system's Mosquitto, else amqtt (``PROGRESSIVED_DEMO_BROKER=amqtt`` forces it)."""
    if os.environ.get("PROGRESSIVED_DEMO_BROKER") != "amqtt" and find_mosquitto():
        return Mosquitto().start()
    return AmqttBroker(workdir).start()


def demo_config(metrics_port: int) -> RigConfig:
    """The demo's table: a seeded meter, a board declared lost after 2 s of silence."""
    return RigConfig(
        table=TABLE,
        meter={"id": "main", "seed": Decimal("1000.00"), "rate": 0.15, "reserve_rate": 0.02},
        board={"heartbeat_interval_s": 0.5, "missed_heartbeats": 4, "reconnect_initial_s": 0.2},
        mqtt={"meter_max_rate_hz": 10},
        metrics_port=metrics_port,
        header="# written by progressived demo",
    )


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
                with contextlib.suppress(ValueError):
                    loaded = json.loads(payload)
                    event = loaded if isinstance(loaded, dict) else None
            if event is not None:
                if any(e.get("seq") == event.get("seq") for e in events[-50:]):
                    continue  # the same event delivered again after a reconnect
                events.append(event)
            if view.apply(topic, bytes(payload)):
                screen.sign(view.plain() if plain else view.render())
            said = narrate(event) if event is not None else None
            if said:
                screen.say(said)


def _banner(
    work: Path, broker: Mosquitto | AmqttBroker, metrics_port: int, keep: bool, web_port: int
) -> str:
    config, socket = work / "progressived.toml", work / "control.sock"
    fate = "kept at exit" if keep else "removed at exit; --keep keeps them"
    return "\n".join(
        [
            f"broker      mqtt://{broker.host}:{broker.port}  (prefix progressive)",
            f"board       pty at {work / 'board'}  (progressivectl simulate-board)",
            f"daemon      progressived run --config {config}",
            f"control     {socket}  (progressivectl status --socket {socket})",
            f"files       {work}: progressived.toml, ledger.db, daemon.log, board.log ({fate})",
            f"ledger      {work / 'ledger.db'}",
            f"metrics     http://127.0.0.1:{metrics_port}/metrics",
            f"logs        {work / 'daemon.log'}, {work / 'board.log'}",
            f"sign        progressivectl sign --port {broker.port} --table {TABLE}",
            f"web sign    http://127.0.0.1:{web_port}/table/{TABLE}  (open it in a browser;"
            f" every table: http://127.0.0.1:{web_port}/)",
        ]
    )


def _header(work: Path, keep: bool) -> str:
    """The banner's two lines that matter most, kept at the top of a redrawn screen."""
    fate = "kept" if keep else "removed at exit"
    return f"control socket {work / 'control.sock'}\nfiles {work} ({fate})"


_TERMINATED = threading.Event()  # SIGTERM (a requested stop) raised the KeyboardInterrupt


def _interrupt(signum: int, frame: object) -> None:
    _TERMINATED.set()
    raise KeyboardInterrupt


def run_demo(
    *,
    headless: bool,
    rounds: int,
    workdir: Path | None = None,
    keep: bool = False,
    out: TextIO = sys.stdout,
) -> int:
    """Start everything, play the scripted rounds, then (unless headless) forward typing.

    A temporary directory is removed at exit unless ``keep``; a ``workdir`` is always kept.
    """
    _TERMINATED.clear()
    keep = keep or workdir is not None
    on_main_thread = threading.current_thread() is threading.main_thread()
    if on_main_thread:  # a SIGTERM cleans up as Ctrl-C does
        previous = signal.signal(signal.SIGTERM, _interrupt)
    work = workdir or Path(tempfile.mkdtemp(prefix="progressived-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    # The sign watcher's MQTT client logs through "mqtt"; without a handler Python prints
    # its warnings raw, e.g. when a Ctrl-C stops the broker first. Its failures still end
    # the demo (pump raises them).
    logging.getLogger("mqtt").addHandler(logging.NullHandler())
    status = 1
    try:
        try:
            broker = start_broker(work)
        except BrokerUnavailable as exc:
            print(f"progressived demo: {exc}", file=sys.stderr)
            return 2
        try:
            metrics_port, web_port = free_port(), free_port()
            config = write_config(
                work,
                demo_config(metrics_port),
                broker_host="127.0.0.1",
                broker_port=broker.port,
                link=work / "board",
            )
            banner = _banner(work, broker, metrics_port, keep, web_port)
            print(banner, file=out, flush=True)
            tty = not headless and is_terminal(out)
            screen = Screen(out, tty=tty, header=_header(work, keep))
            status = _init_ledger(config, work / "ledger.db", out)
            if status == 0:
                status = _play(
                    work, config, broker.host, broker.port, headless, rounds, screen, web_port
                )
        finally:
            broker.stop()
    except KeyboardInterrupt:
        # Ctrl-C at any moment, even while the processes start: one line. The children got
        # the same SIGINT; a second Ctrl-C must not cut their cleanup. Interactively, Ctrl-C
        # is how the demo ends and SIGTERM is a requested stop (status 0); Ctrl-C cuts a
        # headless run short (status 130, docs/operations.md's exit codes).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _close_loops()
        if headless and not _TERMINATED.is_set():
            print("\nprogressived demo: interrupted: stopping", file=sys.stderr)
            status = 130
        else:
            print("\nstopped", file=out)
            status = 0
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous)
        if keep:
            print(f"kept the demo's files in {work}", file=out, flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
            gone = "removed" if not work.exists() else "could not remove"
            print(f"{gone} the demo's files in {work}", file=out, flush=True)
    return status


def _join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=5)


# The sign watcher's event loop while the demo plays: a Ctrl-C that lands while it runs
# leaves the MQTT client's tasks pending, and at exit they (and the client's socket
# callbacks into a closed loop) would print tracebacks.
_OPEN_LOOPS: list[asyncio.AbstractEventLoop] = []


def _close_loops() -> None:
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


def _init_ledger(config: Path, ledger: Path, out: TextIO) -> int:
    """`progressived init` for the demo's own ledger, as an operator does for a new table
    (the daemon refuses a missing ledger); a ledger left in ``--workdir`` is kept."""
    if ledger.exists():
        print(f"init        kept the ledger of an earlier demo: {ledger}", file=out)
        return 0
    done = subprocess.run(
        [*PROGRESSIVED, "init", "--config", str(config), "--operator", "demo"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        print(done.stderr.strip(), file=sys.stderr)
        return done.returncode
    print(f"init        {done.stdout.strip()}", file=out)
    return 0


def _play(
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
    log_lock = threading.Lock()
    link = work / "board"
    sim_cmd = [*PROGRESSIVECTL, "simulate-board", "--link", str(link), "--seats", "7"]
    sim_cmd += ["--heartbeat", "0.5"]
    pipes: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "bufsize": 1}
    threads: list[threading.Thread] = []
    with contextlib.ExitStack() as stack:
        sim_log = stack.enter_context((work / "board.log").open("w"))
        daemon_log = stack.enter_context((work / "daemon.log").open("w"))
        # Unwound in reverse: the processes stop, their last lines reach the logs, then the
        # logs close.
        stack.callback(_join, threads)
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
        # The web sign (docs/sign.md) for the banner's URL; its lines go to websign.log.
        web_log = stack.enter_context((work / "websign.log").open("w"))
        web_cmd = [*PROGRESSIVECTL, "sign", "--web", "--port", str(port), "--table", TABLE]
        web_cmd += ["--listen", f"127.0.0.1:{web_port}"]
        stack.enter_context(_process(web_cmd, stdout=web_log, stderr=subprocess.STDOUT))
        with _process(
            [*PROGRESSIVED, "run", "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            bufsize=1,
        ) as daemon:
            assert daemon.stdout is not None
            threads.append(
                tee_lines(daemon.stdout, daemon_log, daemon_problem, said.put, threading.Lock())
            )
            view = SignView("progressive", "main", TABLE)
            events: list[dict[str, Any]] = []
            loop = asyncio.new_event_loop()
            watcher = loop.create_task(_watch(host, port, view, events, screen, plain=headless))
            _OPEN_LOOPS.append(loop)  # for a Ctrl-C: see _close_loops

            def pump(seconds: float) -> None:
                loop.run_until_complete(asyncio.sleep(seconds))
                if watcher.done() and watcher.exception():
                    raise RuntimeError(f"sign subscriber failed: {watcher.exception()}")
                while not said.empty():
                    screen.say(said.get_nowait())
                screen.draw()

            def type_line(line: str) -> None:
                assert sim.stdin is not None
                try:
                    sim.stdin.write(line.rstrip("\n") + "\n")
                    sim.stdin.flush()
                except (BrokenPipeError, ValueError):  # after `quit`: the simulator is gone
                    said.put("board error: the board simulator has stopped; Ctrl-C ends the demo")

            def online() -> bool:
                pump(0.1)
                return any(e.get("kind") == "board_online" for e in events)

            try:
                _wait_for(online, 30, "the daemon to see the board")
                count = rounds if headless else len(ROUNDS)
                played = play_script(count, type_line, pump, screen)
                reconciled = await_reconciled(events, played, pump)
                screen.say(f"rounds reconciled: {reconciled} of {played}; meter {view.display}")
                pump(0)
                if headless:
                    return 0 if reconciled >= played and daemon.poll() is None else 1
                interactive.set()
                forward_typing(type_line, pump, screen)
                return 0
            finally:
                watcher.cancel()
                with contextlib.suppress(BaseException):
                    loop.run_until_complete(watcher)
                loop.close()
