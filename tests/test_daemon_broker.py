"""The table daemon and its broker, seen from outside: status, metrics, the log, a sign.

* An idle table (nothing played) whose broker dies says so within the documented bound
  (``progressivectl status``, ``progressive_broker_connected``), and a broker restarted
  EMPTY on the same port has the table's retained status and meter back, with no play.
* A wrong password is "not authorised" (not "unreachable"), said once, retried.
* Publishes the broker's ACL refuses (a user name that is not the table id) are counted,
  make the table unhealthy, and lose nothing: once the ACL is fixed the outbox drains.
* A clean stop logs no warning.

The test's event loop also runs the simulated board, which must beat every 0.2 s (the
daemon takes it offline after 3 s of silence and journals it): every blocking call in a
test (the control socket, a scrape, a ``progressivectl`` process) runs in a thread. Run
on the loop, a ``progressivectl status`` that took 6 s to start on a loaded machine took
the board offline and back (4 rows more than "nothing was played": ``assert 11 == 7``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from prometheus_client.parser import text_string_to_metric_families

from progressived.runtime.control import request
from progressived.testing.board import simulator_factory
from progressived.testing.broker import free_port
from progressived.testing.rig import Table
from progressived.testing.rig import table as rig_table
from progressived.testing.waits import until
from tests.daemon_harness import TABLE, harness_config
from tests.mqtt_schemas import problems

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)

STATUS = f"progressive/table/{TABLE}/status"
METER = f"progressive/table/{TABLE}/meter/main"
KEEPALIVE_S = 5  # the harness's [mqtt] keepalive_s
LOSS_BOUND_S = 2 * KEEPALIVE_S + 2  # docs/mqtt.md, "Reconnecting"


@contextlib.asynccontextmanager
async def table(
    tmp: Path, *, broker_config: str = "", metrics_port: int = 0, **mqtt: Any
) -> AsyncIterator[Table]:
    """The harness's table with more ``[mqtt]`` keys; a broker without persistence."""
    config = harness_config(metrics_port=str(metrics_port))
    config = dataclasses.replace(config, mqtt={**config.mqtt, **mqtt})
    async with rig_table(
        tmp,
        config,
        board=simulator_factory(heartbeat_interval_s=0.2),
        persistence=False,
        broker_config=broker_config,
        sign="it-sign",
        check=problems,
    ) as t:
        yield t
    assert not t.sub.problems, "\n".join(t.sub.problems[:20])


@pytest.fixture
def broker_files() -> Iterator[Path]:
    """A directory Mosquitto can read after it drops to its own user (a test's tmp_path is
    private to root)."""
    path = Path(tempfile.mkdtemp(prefix="mosquitto-files-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def status(t: Table) -> dict[str, Any]:
    answer = request(t.tmp / "control.sock", {"action": "status"}, timeout=10)
    assert answer["ok"], answer
    found: dict[str, Any] = answer["status"]
    return found


def ctl_status(t: Table) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "progressived.cli.ctl", "status", "--socket", str(t.tmp / "control.sock")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def metric(port: int, name: str) -> float:
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels.get("table") == TABLE:
                return float(sample.value)
    raise AssertionError(f"no {name} in the exposition")


async def seconds_until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> float:
    """Poll ``check`` (in a thread: it may block) until true; the seconds it took."""
    started = time.monotonic()
    await until(check, what, timeout, in_thread=True)
    return time.monotonic() - started


async def retained(host: str, port: int, topics: list[str]) -> dict[str, dict[str, Any]]:
    """What a sign connecting now receives as retained messages on ``topics`` (waits for
    one on each: an independent subscriber, not the rig's)."""
    seen: dict[str, dict[str, Any]] = {}
    async with aiomqtt.Client(host, port, identifier="late-sign") as sign:
        for topic in topics:
            await sign.subscribe(topic, qos=1)
        async for message in sign.messages:
            if message.retain and isinstance(message.payload, bytes):
                seen[str(message.topic)] = json.loads(message.payload)
            if set(seen) >= set(topics):
                return seen
    return seen  # pragma: no cover - the iterator ends only by an error


def entries(log: str) -> list[dict[str, Any]]:
    """The daemon's JSON log lines (each may carry a ``<N>`` journald priority prefix)."""
    found = []
    for line in log.splitlines():
        with contextlib.suppress(ValueError):
            found.append(json.loads(re.sub(r"^<\d>", "", line)))
    return found


def warnings_in(log: str) -> list[dict[str, Any]]:
    return [e for e in entries(log) if e.get("level") in ("warning", "error", "critical")]


async def test_an_idle_table_sees_its_broker_die_and_is_back_on_an_empty_one(
    tmp_path: Path,
) -> None:
    port = free_port()
    async with table(tmp_path, metrics_port=port) as t:
        t.start_daemon()
        await t.online()
        # Settled: connected, the table open (its start-up rows journaled), the sign has it.
        await seconds_until(lambda: (s := status(t))["broker"]["connected"] and not s["closed"], "open")
        head = (await asyncio.to_thread(status, t))["ledger"]["head_seq"]
        await t.sub.wait(lambda: any(m["seq"] == head for m in t.sub.on(METER)), "the meter")
        before = await retained(t.broker.host, t.broker.port, [STATUS, METER])
        assert (await asyncio.to_thread(metric, port, "progressive_broker_connected")) == 1
        # Idle: nothing is played from here on. The broker dies.
        t.broker.stop(signal.SIGKILL)
        took = await seconds_until(
            lambda: metric(port, "progressive_broker_connected") == 0, "the metric", 2 * LOSS_BOUND_S
        )
        assert took <= LOSS_BOUND_S
        assert "broker: DISCONNECTED" in (await asyncio.to_thread(ctl_status, t))
        assert (await asyncio.to_thread(status, t))["broker"]["state"] == "unreachable"
        # A broker restarted empty (no persistence) on the same port: the table reconnects
        # and publishes its status and meter again, retained, with no play.
        t.broker.start()
        restarted = time.monotonic()
        await seconds_until(lambda: status(t)["broker"]["connected"], "reconnected", LOSS_BOUND_S)
        after = await asyncio.wait_for(
            retained(t.broker.host, t.broker.port, [STATUS, METER]), LOSS_BOUND_S
        )
        assert time.monotonic() - restarted <= LOSS_BOUND_S
        assert after[STATUS]["status"] == "online"
        assert after[STATUS]["boot"] == before[STATUS]["boot"]  # the same run, reconnected
        assert after[METER]["cents"] == before[METER]["cents"]
        assert (await asyncio.to_thread(status, t))["ledger"]["head_seq"] == head  # nothing was played
        assert (await asyncio.to_thread(metric, port, "progressive_broker_connected")) == 1
        assert "broker: connected" in (await asyncio.to_thread(ctl_status, t))
        # A clean stop says nothing alarming.
        said = len(t.log_text())
        assert warnings_in(t.log_text()[:said])  # the lost connection was said (not vacuous)
        assert t.stop_daemon() == 0
        assert warnings_in(t.log_text()[said:]) == []


async def test_a_wrong_password_is_not_authorised_said_once_and_retried(
    tmp_path: Path, broker_files: Path
) -> None:
    passwd = broker_files / "mosquitto.passwd"
    passwd.touch()
    subprocess.run(["mosquitto_passwd", "-b", str(passwd), TABLE, "right"], check=True)
    passwd.chmod(0o644)
    secret = tmp_path / "mqtt-password"
    secret.write_text("wrong\n")
    async with table(
        tmp_path,
        broker_config=f"password_file {passwd}\n",
        username=TABLE,
        password_file=str(secret),
    ) as t:
        broker_log = t.broker.workdir / "mosquitto.log"
        t.start_daemon()
        await seconds_until(lambda: t.logged_running() and status(t)["board"]["online"], "running")
        # Several refused attempts, as the broker saw them.
        await seconds_until(
            lambda: broker_log.read_text().count("not authorised") >= 5, "5 refused attempts"
        )
        shown = await asyncio.to_thread(ctl_status, t)
        assert "broker: DISCONNECTED (not authorised)" in shown, shown
        assert "health: degraded: broker refused the login: not authorised" in shown, shown
        said = [e for e in entries(t.log_text()) if "broker refused the login" in e["event"]]
        assert len(said) == 1, said
        assert said[0]["level"] == "error" and said[0]["username"] == TABLE
        assert "broker unreachable" not in t.log_text()


async def test_refused_publishes_are_counted_unhealthy_and_lose_nothing(
    tmp_path: Path, broker_files: Path
) -> None:
    """The table logs in as ``table-it-1`` where the ACL's user name is the table id: every
    publish is refused. Once the ACL lets that account write (and Mosquitto reloads it), the
    outbox drains in order and the table is healthy again."""
    acl = broker_files / "progressive.acl"
    acl.write_text("topic read progressive/#\npattern write progressive/table/%u/#\n")
    acl.chmod(0o644)
    port = free_port()
    async with table(
        tmp_path, broker_config=f"acl_file {acl}\n", metrics_port=port, username="table-it-1"
    ) as t:
        t.start_daemon()
        # The sign hears nothing from this table: watch it through its control socket.
        await seconds_until(lambda: t.logged_running() and status(t)["board"]["online"], "running")
        await seconds_until(lambda: metric(port, "progressive_broker_publish_denied_total") >= 1, "refused")
        s = await asyncio.to_thread(status, t)
        assert s["broker"]["connected"] and s["broker"]["denied"], s["broker"]
        assert s["healthy"] is False and s["health"].startswith(
            f"degraded: broker refused publishing on progressive/table/{TABLE}/"
        )
        assert (await asyncio.to_thread(metric, port, "progressive_healthy")) == 0
        assert "REFUSES publishing on" in (await asyncio.to_thread(ctl_status, t))
        ledger = sqlite3.connect(f"file:{tmp_path / 'ledger.db'}?mode=ro", uri=True)
        with contextlib.closing(ledger):
            waiting = ledger.execute("SELECT count(*) FROM outbox").fetchone()[0]
        assert waiting >= 1  # not deleted: not delivered
        assert t.sub.events() == []  # and nothing reached the sign
        said = [e for e in entries(t.log_text()) if "broker refused a publish" in e["event"]]
        assert said and len({e["topic"] for e in said}) == len(said)  # once per topic
        # The ACL fixed for this account; Mosquitto reloads it (SIGHUP).
        acl.write_text("topic read progressive/#\nuser table-it-1\ntopic write progressive/#\n")
        assert t.broker.proc is not None
        t.broker.proc.send_signal(signal.SIGHUP)
        await t.online(timeout=30)  # the events journaled meanwhile arrive, in order
        await seconds_until(lambda: status(t)["healthy"], "healthy again")
        seqs = [e["seq"] for e in t.sub.events()]
        assert seqs == sorted(seqs)
        assert t.sub.events("daemon_started")  # the first event of the run, kept meanwhile
        assert not (await asyncio.to_thread(status, t))["broker"]["denied"]
