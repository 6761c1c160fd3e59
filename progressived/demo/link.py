"""``progressived demo --tables N``: one linked meter fed by N tables, on one machine.

It starts, each as its own process as on a casino floor: an MQTT broker on a free loopback
port, the link controller (``progressived link``, owner of the linked PMG meter, after
``progressived init`` made its ledger), and N tables (``progressived run``, each after its
own ``progressived init``) with a board simulator on a pseudo-terminal each. Then it plays:
every table locks wagers (contributions to the one meter); two tables hit the royal flush
moments apart (the link orders the claims, the first takes the whole meter, the second the
reset one); the supervisors confirm; the link controller is killed (the tables close the
linked progressive after the missed heartbeats; a round locked before the outage finishes,
a claim keyed during it shows PENDING) and restarted (outboxes drain, the claim is priced);
finally ``progressivectl link reconcile`` compares every ledger with the link's. With
``--headless`` the exit status is the reconciliation's: 0 only when it finds no difference.

This module starts and stops the processes (also for tests/reliability and the
benchmarks); :mod:`progressived.demo.link_script` plays the rounds and is the command's
entry point.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import aiomqtt

from progressived.core.money import UNITS_PER_CENT, display
from progressived.core.wirejson import MAX_MESSAGE, WireError, loads_object
from progressived.demo.broker import AmqttBroker, start_broker
from progressived.testing.board import PtyBoard, simulator
from progressived.testing.broker import Mosquitto, free_port
from progressived.testing.config import RigConfig, render_toml, write_config
from progressived.testing.rig import PROGRESSIVECTL, PROGRESSIVED

LINK = "link-a"
METER = "main"
PREFIX = "progressive"


def table_ids(count: int) -> list[str]:
    return [f"pmg-{index:02d}" for index in range(1, count + 1)]


def link_config(work: Path, port: int, tables: list[str], metrics_port: int = 0) -> Path:
    """The link controller's configuration (docs/configuration.md, "The link controller")."""
    path = work / "link.toml"
    sections: dict[str, Any] = {
        "link": {
            "id": LINK,
            "tables": "@TABLES@",
            "policy": "sequential",
            "heartbeat_s": 0.5,
        },
        "link.meters": [
            {"id": METER, "paytable": "pmg-01", "rate": 0.15, "reserve_rate": 0.02},
        ],
        "mqtt": {"host": "127.0.0.1", "port": port},
        "ledger": {"path": work / "link.db"},
        "metrics": {"port": metrics_port},
        "control": {"socket": work / "link.sock"},
        "log": {"format": "json"},
    }
    text = render_toml(sections, "# written by progressived demo --tables")
    path.write_text(text.replace('"@TABLES@"', json.dumps(tables)))
    return path


def table_config(work: Path, table: str, port: int, metrics_port: int = 0) -> Path:
    """A PMG table whose one meter is the link's (docs/link.md, "Joining a link")."""
    rig = RigConfig(
        table=table,
        paytable="pmg-01",
        meter={"id": METER, "link": LINK},
        board={"heartbeat_interval_s": 0.5, "missed_heartbeats": 4, "reconnect_initial_s": 0.2},
        metrics_port=metrics_port,
        link={"id": LINK, "heartbeat_s": 0.5, "missed_heartbeats": 4},
        header=f"# written by progressived demo --tables ({table})",
    )
    return write_config(work, rig, broker_host="127.0.0.1", broker_port=port, link=work / "board")


@dataclass
class Process:
    """A child process logging to ``log``; started again by ``start``."""

    name: str
    cmd: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@dataclass
class DemoTable:
    id: str
    work: Path
    config: Path
    board: PtyBoard
    daemon: Process
    metrics_port: int = 0  # 0: an ephemeral port (not shown)

    async def type(self, *lines: str, pause: float = 0.12) -> None:
        """Board lines as the demo's script spells them: ``bet N``, ``unbet N``, ``key K``,
        ``supervisor on|off``."""
        for line in lines:
            verb, _, arg = line.partition(" ")
            if verb == "bet":
                self.board.place_bet(int(arg))
            elif verb == "unbet":
                self.board.remove_bet(int(arg))
            elif verb == "key":
                self.board.press(arg)
            elif verb == "supervisor":
                self.board.supervisor(arg == "on")
            await asyncio.sleep(pause)


@dataclass
class Floor:
    """What the watcher saw: each table's events, the linked meter as the signs show it."""

    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    meter: dict[str, Any] = field(default_factory=dict)
    say: Callable[[str], None] = print

    def of(self, table: str, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events.get(table, []) if e.get("kind") == kind]

    async def until(self, predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
        try:
            async with asyncio.timeout(timeout):
                while not predicate():
                    await asyncio.sleep(0.05)
        except TimeoutError:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}") from None


def dollars(units: object) -> str:
    if not isinstance(units, int):
        return "?"
    return display(units)


async def watch(port: int, floor: Floor) -> None:
    """Subscribe as the signs do: the linked meter and every table's events, narrated."""
    async with aiomqtt.Client("127.0.0.1", port, identifier="demo-watcher") as client:
        await client.subscribe(f"{PREFIX}/link/{LINK}/meter/#", qos=1)
        await client.subscribe(f"{PREFIX}/table/+/event", qos=1)
        async for message in client.messages:
            payload = message.payload
            if not isinstance(payload, (bytes, bytearray)):
                continue
            try:
                data = loads_object(payload, max_bytes=MAX_MESSAGE)
            except WireError:
                continue
            topic = str(message.topic)
            if "/link/" in topic:
                show_meter(floor, data)
            else:
                table = topic.split("/")[2]
                seen = floor.events.setdefault(table, [])
                if any(e.get("seq") == data.get("seq") for e in seen[-50:]):
                    continue  # a repeat after a reconnect
                seen.append(data)
                said = narrate_event(table, data)
                if said:
                    floor.say(said)


def show_meter(floor: Floor, data: dict[str, Any]) -> None:
    old = floor.meter
    key = (data.get("epoch", 0), data.get("lseq", 0))
    if old and (old.get("epoch", 0), old.get("lseq", 0)) >= key:
        return  # a sign never shows an older value than one it showed
    floor.meter = data
    hit = data.get("hit")
    if hit and hit != old.get("hit"):
        floor.say(
            f"LINKED METER  hit at {hit.get('table')} seat {hit.get('seat')}: "
            f"{hit.get('hand')} {dollars(hit.get('units'))}; meter now {dollars(data.get('units'))}"
        )
    elif old.get("units") != data.get("units"):
        floor.say(f"linked meter  {dollars(data.get('units'))}  (epoch {data.get('epoch')})")


_SAID = {
    "round_locked": "round {round} locked",
    "award_keyed": "seat {seat} {hand}: award {units}",
    "award_confirmed": "seat {seat} {hand}: supervisor confirmed, paid {units}",
    "round_reconciled": "round {round} reconciled",
    "table_closed": "CLOSED ({reason})",
    "table_opened": "open again ({reason})",
    "claim_refused": "seat {seat} {hand}: the link refused the claim",
}


def narrate_event(table: str, event: dict[str, Any]) -> str | None:
    text = _SAID.get(str(event.get("kind")))
    if text is None:
        return None
    fields = {k: event.get(k, "?") for k in ("round", "seat", "hand", "reason")}
    cents = event.get("cents")
    fields["units"] = dollars(cents * UNITS_PER_CENT) if isinstance(cents, int) else "?"
    return f"{table:<7} " + text.format(**fields)


@dataclass
class FloorRun:
    """The running floor: the link controller, the tables, the brokers (the link's is the
    tables' unless ``split_brokers``: then a relay must carry the link topics between them)."""

    link: Process
    tables: list[DemoTable]
    broker: Mosquitto | AmqttBroker
    link_broker: Mosquitto | AmqttBroker
    link_config: Path | None = None
    link_metrics_port: int = 0  # 0: an ephemeral port (not shown)

    @property
    def port(self) -> int:
        return self.broker.port


@contextlib.asynccontextmanager
async def floor_processes(
    work: Path, count: int, out: TextIO, *, split_brokers: bool = False, metrics: bool = False
) -> AsyncIterator[FloorRun]:
    """Broker(s), link controller and ``count`` tables started; everything stopped at exit.

    ``metrics``: each process serves its metrics on a free port it is told (the interactive
    demo prints them); otherwise on an ephemeral one.
    """
    broker = start_broker(work)
    link_broker = Mosquitto().start() if split_brokers else broker
    tables: list[DemoTable] = []
    link: Process | None = None
    try:
        ids = table_ids(count)
        link_metrics = free_port() if metrics else 0
        config = link_config(work, link_broker.port, ids, link_metrics)
        _init(config, out, "link")
        link = Process("link", [*PROGRESSIVED, "link", "--config", str(config)], work / "link.log")
        link.start()
        for table in ids:
            home = work / table
            home.mkdir(exist_ok=True)
            board = simulator(home / "board", seats=7, heartbeat_interval_s=0.5)
            await board.start()
            metrics_port = free_port() if metrics else 0
            cfg = table_config(home, table, broker.port, metrics_port)
            _init(cfg, out, table)
            run = [*PROGRESSIVED, "run", "--config", str(cfg)]
            daemon = Process(table, run, home / "daemon.log")
            tables.append(DemoTable(table, home, cfg, board, daemon, metrics_port))
        for t in tables:
            t.daemon.start()
        yield FloorRun(link, tables, broker, link_broker, config, link_metrics)
    finally:
        for t in tables:
            t.daemon.stop()
            with contextlib.suppress(Exception):
                await t.board.stop()
        if link is not None:
            link.stop()
        if link_broker is not broker:
            link_broker.stop()
        broker.stop()


def _init(config: Path, out: TextIO, who: str) -> None:
    ledger_exists = any(p.name.endswith(".db") for p in config.parent.iterdir())
    if ledger_exists:
        return
    done = subprocess.run(
        [*PROGRESSIVED, "init", "--config", str(config), "--operator", "demo"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"progressived init for {who} failed: {done.stderr.strip()}")
    print(f"init        {who}: {done.stdout.strip()}", file=out, flush=True)


def reconcile(work: Path, tables: list[DemoTable]) -> tuple[int, dict[str, Any]]:
    """``progressivectl link reconcile --json`` over every ledger: its status and report."""
    cmd = [*PROGRESSIVECTL, "link", "reconcile", "--link-db", str(work / "link.db")]
    for t in tables:
        cmd += ["--table-db", str(t.work / "ledger.db")]
    done = subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=False)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        report = {"error": (done.stderr or done.stdout).strip()}
    return done.returncode, report
