"""``progressived demo``: the whole product on one machine, started with one command.

It starts, each as its own process as on a real table: an MQTT broker on a free loopback
port (the system's Mosquitto, or the embedded amqtt broker from the ``broker`` extra), the
board simulator on a pseudo-terminal (``progressivectl simulate-board``), the daemon
(``progressived run``), and a terminal sign. It plays scripted rounds — a tray pay, a 100%
jackpot confirmed by the supervisor with envy, a second envy hand — then either exits
(``--headless``) or forwards what you type to the board simulator until Ctrl-C.
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
from pathlib import Path
from typing import IO, Any

import aiomqtt

from progressived.broker import (
    BrokerUnavailable,
    Mosquitto,
    find_mosquitto,
    free_port,
    wait_for_port,
)
from progressived.sign import SignView

TABLE = "demo-1"

# Default keypad codes (config/keypad.example.toml): tcp-sd-1 hands are H1 akq-spades,
# H2 akq-suited, H3 straight-flush, H4 three-of-a-kind, H5 straight.
ROUNDS: list[list[str]] = [
    [  # a straight from the tray; the AKQ of spades takes the meter; envy to seats 1 and 5
        "bet 1",
        "bet 3",
        "bet 5",
        "key LOCK",
        "unbet 1",
        "unbet 3",
        "unbet 5",
        "key S5",
        "key H5",
        "key S3",
        "key H1",
        "supervisor on",
        "key OK",
        "supervisor off",
        "key RECON",
    ],
    [  # AKQ of hearts at seat 2 from the tray, envy $25 to seats 4 and 6
        "bet 2",
        "bet 4",
        "bet 6",
        "key LOCK",
        "unbet 2",
        "unbet 4",
        "unbet 6",
        "key S2",
        "key H2",
        "key RECON",
    ],
    [  # a keying mistake turned off with a second press; three of a kind
        "bet 7",
        "key LOCK",
        "unbet 7",
        "key S7",
        "key H3",
        "key S7",
        "key H3",
        "key S7",
        "key H4",
        "key RECON",
    ],
]


def _progressivectl() -> list[str]:
    return [sys.executable, "-m", "progressived.cli.ctl"]


def _progressived() -> list[str]:
    return [sys.executable, "-m", "progressived.cli.daemon"]


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


def write_config(workdir: Path, broker_port: int, link: Path, metrics_port: int) -> Path:
    path = workdir / "progressived.toml"
    path.write_text(
        f"""# written by progressived demo
[table]
id = "{TABLE}"
seats = 7
paytable = "tcp-sd-1"

[[progressive.meters]]
id = "main"
seed = 1000.00
rate = 0.15
reserve_rate = 0.02

[board]
driver = "serial"
port = "{link}"
heartbeat_interval_s = 0.5
missed_heartbeats = 4
reconnect_initial_s = 0.2

[mqtt]
host = "127.0.0.1"
port = {broker_port}
meter_max_rate_hz = 10

[ledger]
path = "{workdir / "ledger.db"}"

[metrics]
port = {metrics_port}

[control]
socket = "{workdir / "control.sock"}"

[log]
format = "json"
"""
    )
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


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


async def _watch(
    host: str, port: int, view: SignView, events: list[dict[str, Any]], out: IO[str], plain: bool
) -> None:
    last = ""
    async with aiomqtt.Client(host, port) as client:
        await client.subscribe("progressive/#", qos=1)
        async for message in client.messages:
            payload = message.payload
            if not isinstance(payload, (bytes, bytearray)):
                continue
            topic = str(message.topic)
            if topic.endswith("/event"):
                with contextlib.suppress(ValueError):
                    events.append(json.loads(payload))
            if view.apply(topic, bytes(payload)):
                shown = view.plain() if plain else view.render()
                if shown != last:
                    out.write(shown + "\n")
                    out.flush()
                    last = shown


def run_demo(
    *, headless: bool, rounds: int, workdir: Path | None = None, out: IO[str] = sys.stdout
) -> int:
    work = workdir or Path(tempfile.mkdtemp(prefix="progressived-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    link = work / "board"
    try:
        broker = start_broker(work)
    except BrokerUnavailable as exc:
        print(f"progressived demo: {exc}", file=sys.stderr)
        return 2
    metrics_port = free_port()
    config = write_config(work, broker.port, link, metrics_port)
    print(f"broker      mqtt://{broker.host}:{broker.port}  (prefix progressive)", file=out)
    print(f"board       pty at {link}  (progressivectl simulate-board)", file=out)
    print(f"daemon      progressived run --config {config}", file=out)
    print(f"ledger      {work / 'ledger.db'}", file=out)
    print(f"metrics     http://127.0.0.1:{metrics_port}/metrics", file=out)
    print(f"logs        {work / 'daemon.log'}", file=out)
    print(f"sign        progressivectl sign --port {broker.port}", file=out)
    out.flush()
    # The sign watcher's MQTT client logs through "mqtt"; without a handler Python prints
    # its warnings raw, e.g. when a Ctrl-C stops the broker first. Its failures still end
    # the demo (pump raises them).
    logging.getLogger("mqtt").addHandler(logging.NullHandler())
    status = 1
    try:
        status = _init_ledger(config, work / "ledger.db", out)
        if status == 0:
            status = _play(work, link, config, broker.host, broker.port, headless, rounds, out)
    except KeyboardInterrupt:
        # Ctrl-C at any moment, even while the processes start: one line, status 130.
        # The children got the same SIGINT; a second Ctrl-C must not cut their cleanup.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _close_loops()
        print("\nprogressived demo: interrupted: stopping", file=sys.stderr)
        status = 130
    finally:
        broker.stop()
    return status


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


def _init_ledger(config: Path, ledger: Path, out: IO[str]) -> int:
    """`progressived init` for the demo's own ledger, as an operator does for a new table
    (the daemon refuses a missing ledger); a ledger left in ``--workdir`` is kept."""
    if ledger.exists():
        print(f"init        kept the ledger of an earlier demo: {ledger}", file=out)
        return 0
    done = subprocess.run(
        [*_progressived(), "init", "--config", str(config), "--operator", "demo"],
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
    link: Path,
    config: Path,
    host: str,
    port: int,
    headless: bool,
    rounds: int,
    out: IO[str],
) -> int:
    sim_log = (work / "board.log").open("w")
    daemon_log = (work / "daemon.log").open("w")
    sim_cmd = [
        *_progressivectl(),
        "simulate-board",
        "--link",
        str(link),
        "--seats",
        "7",
        "--heartbeat",
        "0.5",
    ]
    with _process(sim_cmd, stdin=subprocess.PIPE, stdout=sim_log, stderr=subprocess.STDOUT) as sim:
        _wait_for(link.exists, 20, "the board simulator's pty")
        with _process(
            [*_progressived(), "run", "--config", str(config)],
            stdout=daemon_log,
            stderr=subprocess.STDOUT,
        ) as daemon:
            view = SignView("progressive", "main")
            events: list[dict[str, Any]] = []
            loop = asyncio.new_event_loop()
            watcher = loop.create_task(_watch(host, port, view, events, out, plain=headless))
            _OPEN_LOOPS.append(loop)  # for a Ctrl-C: see _close_loops

            def pump(seconds: float) -> None:
                loop.run_until_complete(asyncio.sleep(seconds))
                if watcher.done() and watcher.exception():
                    raise RuntimeError(f"sign subscriber failed: {watcher.exception()}")

            def online() -> bool:
                pump(0.1)
                return any(e.get("kind") == "board_online" for e in events)

            _wait_for(online, 30, "the daemon to see the board")
            assert sim.stdin is not None
            played = 0
            for index in range(rounds if headless else len(ROUNDS)):
                for line in ROUNDS[index % len(ROUNDS)]:
                    sim.stdin.write(line + "\n")
                    sim.stdin.flush()
                    pump(0.15)
                played += 1
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                pump(0.2)
                done = sum(1 for e in events if e.get("kind") == "round_reconciled")
                if done >= played:
                    break
            reconciled = [e for e in events if e.get("kind") == "round_reconciled"]
            print(
                f"rounds reconciled: {len(reconciled)} of {played}; meter {view.display}", file=out
            )
            if headless:
                watcher.cancel()
                with contextlib.suppress(BaseException):
                    loop.run_until_complete(watcher)
                loop.close()
                ok = len(reconciled) >= played and daemon.poll() is None
                return 0 if ok else 1
            print(
                "interactive: type simulator commands (bet 3, key LOCK, key S3, key H1, "
                "supervisor on, key OK, key RECON, unplug, replug, ...); Ctrl-C to stop",
                file=out,
            )
            out.flush()
            lines: queue.Queue[str] = queue.Queue()

            def read_stdin() -> None:
                for typed in sys.stdin:
                    lines.put(typed)
                lines.put("")  # end of input

            threading.Thread(target=read_stdin, name="stdin", daemon=True).start()
            try:
                while True:
                    pump(0.1)
                    try:
                        line = lines.get_nowait()
                    except queue.Empty:
                        continue
                    if not line:
                        break
                    sim.stdin.write(line)
                    sim.stdin.flush()
            except KeyboardInterrupt:
                print("\nstopping...", file=out)
            watcher.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(watcher)
            loop.close()
            return 0
