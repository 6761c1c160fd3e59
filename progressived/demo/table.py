"""``progressived demo``: the whole product on one machine, started with one command.

It starts, each as its own process as on a real table: an MQTT broker on a free loopback
port (the system's Mosquitto, or the embedded amqtt broker from the ``broker`` extra), the
board simulator on a pseudo-terminal (``progressivectl simulate-board``), the daemon
(``progressived run``), and a sign subscribed to the broker. It plays scripted rounds
(progressived/demo/script.py) — a tray pay, a 100% jackpot confirmed by the supervisor with
envy, a second envy hand, a keying mistake turned off — narrating each event, then either
exits (``--headless``) or forwards what you type to the board simulator until Ctrl-C or the
end of input, showing the simulator's answers and errors and the daemon's refusals and
warnings (they also go to board.log and daemon.log). On a terminal the screen is redrawn in
place; otherwise it is appended as plain text. The start banner names the control socket and
the working directory; at exit it says whether that directory was removed.

This module prepares (config, ledger, banner) and cleans up (Ctrl-C, SIGTERM, the working
directory); :mod:`progressived.demo.broker` picks the broker and
:mod:`progressived.demo.play` runs the processes and the rounds.
"""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from decimal import Decimal
from pathlib import Path
from typing import TextIO

from progressived.demo.broker import AmqttBroker, start_broker
from progressived.demo.play import TABLE, DaemonStopped, close_loops, play
from progressived.signs.screen import Screen, is_terminal
from progressived.testing.broker import BrokerUnavailable, Mosquitto, free_port
from progressived.testing.config import RigConfig, write_config
from progressived.testing.rig import PROGRESSIVED


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


def _header(work: Path, keep: bool, web_port: int) -> str:
    """The banner's lines that matter most, kept at the top of a redrawn screen."""
    fate = "kept" if keep else "removed at exit"
    return (
        f"web sign http://127.0.0.1:{web_port}/table/{TABLE}  (open it in a browser)\n"
        f"control socket {work / 'control.sock'}\nfiles {work} ({fate})"
    )


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
        status = _play_with_broker(work, keep, headless, rounds, out)
    except KeyboardInterrupt:
        # Ctrl-C at any moment, even while the processes start: one line and status 130
        # (docs/operations.md's exit codes), headless or not. The children got the same
        # SIGINT; a second Ctrl-C must not cut their cleanup. SIGTERM is a requested stop
        # (status 0).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        close_loops()
        if not _TERMINATED.is_set():
            print("\nprogressived demo: interrupted: stopping", file=sys.stderr)
            status = 130
        else:
            print("\nstopped", file=out)
            status = 0
    except DaemonStopped as exc:  # e.g. its metrics port taken since the demo chose it
        close_loops()
        print(f"progressived demo: {exc}", file=sys.stderr)
        status = exc.status
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


def _play_with_broker(work: Path, keep: bool, headless: bool, rounds: int, out: TextIO) -> int:
    """The broker started, the table's files written, the ledger made, then the play; the
    broker stopped whatever happens."""
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
        screen = Screen(out, tty=tty, header=_header(work, keep, web_port))
        status = _init_ledger(config, work / "ledger.db", out)
        if status == 0:
            status = play(
                work, config, broker.host, broker.port, headless, rounds, screen, web_port
            )
    finally:
        broker.stop()
    return status


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
