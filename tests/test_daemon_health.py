"""What the table says when part of it stops working and a restart would not help.

* The ledger file deleted (``rm``), then replaced by a copy, under the running daemon:
  within seconds ``status``, the metrics, the log and the unit's status line say so, the
  progressive closes (the sign shows CLOSED) and no wager is accepted after; the rows it
  holds are saved beside the path, and that copy put back starts a healthy table.
* A linked table whose broker dies: health is degraded with the reasons (the broker
  unreachable since when, the linked progressive closed), ``progressive_healthy`` 0 and the
  unit's status line say it; with the broker back, ``ok`` again.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import signal
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from progressived.ledger.verify import verify
from progressived.testing.board import simulator_factory
from progressived.testing.broker import free_port
from progressived.testing.fake_link import FakeLink
from progressived.testing.rig import Table
from progressived.testing.rig import table as rig_table
from progressived.testing.waits import until
from tests.daemon_harness import TABLE, harness_config
from tests.mqtt_schemas import problems
from tests.test_daemon_broker import ctl_status, entries, metric, status
from tests.test_link_table_daemon import linked_config, table_problems

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)

NOTICED_S = 10.0  # "within seconds": the daemon looks every second


def unit_status(t: Table) -> str:
    assert t.notify is not None
    return t.notify.status()


def health_lines(t: Table) -> list[dict[str, Any]]:
    return [e for e in entries(t.log_text()) if e.get("event") == "health"]


async def test_a_ledger_deleted_then_replaced_under_the_daemon_closes_the_progressive(
    tmp_path: Path,
) -> None:
    port = free_port()
    async with rig_table(
        tmp_path,
        harness_config(metrics_port=str(port)),
        board=simulator_factory(heartbeat_interval_s=0.2),
        sign="it-sign",
        check=problems,
        notify_ready=True,
    ) as t:
        t.start_daemon()
        await t.online()
        await until(lambda: status(t)["healthy"], "healthy", in_thread=True)
        ledger = tmp_path / "ledger.db"
        copy = tmp_path / "ledger-copy.db"
        shutil.copyfile(ledger, copy)  # "an older copy", put back later

        ledger.unlink()  # rm under the running daemon
        gone = await until(
            lambda: not (s := status(t))["ledger"]["ok"] and s, "the deletion noticed", NOTICED_S, in_thread=True
        )
        assert f"ledger file {ledger} was deleted" in gone["ledger"]["error"], gone["ledger"]
        assert gone["healthy"] is False
        assert gone["health"].startswith(f"degraded: ledger file {ledger} was deleted"), gone["health"]
        assert "the progressive is closed" in gone["health"]
        assert await asyncio.to_thread(metric, port, "progressive_ledger_ok") == 0
        assert await asyncio.to_thread(metric, port, "progressive_healthy") == 0
        assert await asyncio.to_thread(metric, port, "progressive_table_open") == 0
        text = await asyncio.to_thread(ctl_status, t)
        assert f"ledger: UNAVAILABLE ledger file {ledger} was deleted" in text, text
        await until(lambda: "was deleted" in unit_status(t), "the unit's status line", NOTICED_S)
        assert unit_status(t).startswith("degraded: ledger file"), unit_status(t)
        assert any(e["event"] == "ledger file gone: the progressive is closed" for e in entries(t.log_text()))
        await t.sub.wait(
            lambda: bool(t.sub.meters("main")) and t.sub.meters("main")[-1]["state"] == "closed",
            "the sign shows CLOSED",
        )

        copy.rename(ledger)  # a restored copy: another file at the path
        replaced = await until(
            lambda: "was replaced" in (s := status(t))["ledger"]["error"] and s,
            "the replacement noticed",
            NOTICED_S,
            in_thread=True,
        )
        assert replaced["ledger"]["ok"] is False and replaced["healthy"] is False
        assert replaced["health"].startswith(f"degraded: ledger file {ledger} was replaced")

        # No wager is accepted into a file nobody will see.
        await t.bets(1, 3)
        await t.press("LOCK")
        await until(
            lambda: metric(port, "progressive_commands_rejected_total") >= 1
            if _has(port, "progressive_commands_rejected_total")
            else False,
            "the LOCK refused",
            in_thread=True,
        )
        after = status(t)
        assert after["locked_seats"] == [] and after["phase"] != "locked", after
        assert t.sub.events("round_locked") == []
        # The watchdog goes on pinging (a restart would close the only copy of the rows):
        # the daemon is still running.
        assert t.proc is not None and t.proc.poll() is None

        # Its rows were saved beside the path, kept current: the operator's way back.
        found = re.search(r"its rows are saved to (\S+) \(kept current", after["ledger"]["error"])
        assert found, after["ledger"]["error"]
        rescued = Path(found[1])
        assert rescued.parent == tmp_path and rescued.name.startswith("ledger.db.rescued-")
        await until(lambda: head_of(rescued) == status(t)["ledger"]["head_seq"], "kept current", in_thread=True)
        assert t.stop_daemon() == 0
        assert verify(rescued, replay=True).ok
        rescued.replace(ledger)  # docs/operations.md, "Troubleshooting"
        t.start_daemon()
        await t.online(count=2)
        back = await until(
            lambda: (s := status(t))["healthy"] and s["ledger"]["ok"] and s, "healthy on the copy", in_thread=True
        )
        assert back["health"] == "ok"
        assert verify(ledger, replay=True).ok


def head_of(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return int(conn.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])


def _has(port: int, name: str) -> bool:
    try:
        metric(port, name)
    except AssertionError:
        return False
    return True


@contextlib.asynccontextmanager
async def linked_table(tmp: Path, metrics_port: int) -> AsyncIterator[tuple[Table, FakeLink]]:
    """tests/test_link_table_daemon.py's linked table, with a NOTIFY_SOCKET."""
    async with (
        rig_table(
            tmp,
            linked_config(metrics_port),
            board=simulator_factory(heartbeat_interval_s=0.2),
            sign="it-sign",
            check=table_problems,
            notify_ready=True,
        ) as t,
        FakeLink(t.broker.host, t.broker.port, tables=(TABLE,)) as link,
    ):
        t.start_daemon()
        await t.online()
        await until(
            lambda: (s := status(t))["link"]["up"] and not s["link"]["closed"] and s["healthy"],
            "the link up and the table healthy",
            in_thread=True,
        )
        yield t, link


async def test_a_linked_table_whose_broker_dies_is_degraded_and_says_why(tmp_path: Path) -> None:
    port = free_port()
    async with linked_table(tmp_path, port) as (t, _link):
        assert status(t)["health"] == "ok"
        assert await asyncio.to_thread(metric, port, "progressive_healthy") == 1

        t.broker.stop(signal.SIGKILL)
        down = await until(
            lambda: "link-down" in (s := status(t))["health"] and "broker unreachable" in s["health"] and s,
            "health degraded with both reasons",
            30,
            in_thread=True,
        )
        assert down["healthy"] is False
        assert down["health"].startswith("degraded: broker unreachable since "), down["health"]
        assert "the linked progressive is closed (link-down" in down["health"]
        assert await asyncio.to_thread(metric, port, "progressive_healthy") == 0
        await until(lambda: "broker unreachable" in unit_status(t), "the unit's status line", 10)
        assert unit_status(t).startswith("degraded: "), unit_status(t)
        said = [e for e in health_lines(t) if not e["healthy"]]
        assert said and said[-1]["level"] == "error" and "broker unreachable" in said[-1]["reason"]
        assert t.proc is not None and t.proc.poll() is None  # not restarted for it

        t.broker.start()  # the same port: the table and the link reconnect
        await until(lambda: status(t)["health"] == "ok", "ok again", 60, in_thread=True)
        assert await asyncio.to_thread(metric, port, "progressive_healthy") == 1
        await until(lambda: unit_status(t) == "healthy", "the unit's status line again", 10)
