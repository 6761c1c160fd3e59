"""A table daemon with a linked meter against the fake link, on a real Mosquitto.

pmg-01 at table it-1: meter ``main`` linked to ``link-a`` (the fake link: the pure book in
memory, heartbeats every 0.2 s), a local meter ``side``. Keypad: H1 royal flush. The link as
the table sees it is checked from outside too: ``progressivectl status`` over the control
socket and the Prometheus endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from prometheus_client.parser import text_string_to_metric_families

from progressived.link.core.messages import LedgerHead, Result, decode_table, encode
from progressived.link.store.audit import verify
from progressived.runtime.control import request
from progressived.testing.board import simulator_factory
from progressived.testing.broker import free_port
from progressived.testing.config import RigConfig
from progressived.testing.fake_link import FakeLink
from progressived.testing.rig import Table
from progressived.testing.rig import table as rig_table
from progressived.testing.waits import until
from tests.daemon_harness import TABLE
from tests.mqtt_schemas import problems

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)


def linked_config(metrics_port: int = 0) -> RigConfig:
    return RigConfig(
        table=TABLE,
        paytable="pmg-01",
        meter={"id": "main", "link": "link-a"},
        meters=({"id": "side", "rate": 0.01},),
        link={"id": "link-a", "heartbeat_s": 0.2, "missed_heartbeats": 3, "resend_s": 1.0},
        board={"heartbeat_interval_s": 0.2, "missed_heartbeats": 15},
        mqtt={
            "keepalive_s": 5,
            "meter_max_rate_hz": 20,
            "reconnect_initial_s": 0.1,
            "reconnect_max_s": 0.5,
        },
        log={"format": "json", "level": "debug"},
        metrics_port=metrics_port,
    )


def table_problems(topic: str, message: Any) -> list[str]:
    """docs/mqtt.md's check of the table's own topics (the link's are docs/link.md's)."""
    return problems(topic, message) if topic.startswith("progressive/table/") else []


@contextlib.asynccontextmanager
async def linked(
    tmp: Path, metrics_port: int = 0, **fake: Any
) -> AsyncIterator[tuple[Table, FakeLink]]:
    """The table, its sign and the fake link (``fake``: FakeLink's settings, e.g. ``meter``)."""
    async with (
        rig_table(
            tmp,
            linked_config(metrics_port),
            board=simulator_factory(heartbeat_interval_s=0.2),
            sign="it-sign",
            check=table_problems,
        ) as t,
        FakeLink(t.broker.host, t.broker.port, **{"tables": (TABLE,), **fake}) as link,
    ):
        t.start_daemon()
        await t.online()
        # The table starts with the link down until its first heartbeat: play only once the
        # link is up and the table open, or a LOCK may land while it is still closed.
        await until(
            lambda: (s := status(t))["link"]["up"] and not s["link"]["closed"],
            "the link up and the linked meter open",
            in_thread=True,
        )
        yield t, link
    # Every message the table published matches docs/mqtt.md, the linked meter's `link` too.
    assert not t.sub.problems, "\n".join(t.sub.problems[:20])
    assert any("link" in m for m in t.sub.meters("main")), "no linked meter payload checked"


def rows(t: Table, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{t.tmp / 'ledger.db'}?mode=ro", uri=True)
    try:
        return list(conn.execute(sql, args).fetchall())
    finally:
        conn.close()


def journal(t: Table, kind: str) -> list[dict[str, Any]]:
    found = rows(t, "SELECT data FROM journal WHERE kind = ? ORDER BY seq", (kind,))
    return [json.loads(d) for (d,) in found]


def outbox_empty(t: Table) -> bool:
    return bool(rows(t, "SELECT count(*) FROM link_outbox")[0][0] == 0)


async def supervisor(t: Table, *codes: str) -> None:
    t.sim.supervisor(True)
    await asyncio.sleep(0.2)
    await t.press(*codes)
    t.sim.supervisor(False)


def types(link: FakeLink) -> list[str]:
    return [decode_table(a.message).type for a in link.applied_for(TABLE)]


async def test_lock_claim_confirm_through_the_link(tmp_path: Path) -> None:
    async with linked(tmp_path) as (t, link):
        await t.bets(1, 3)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        await until(lambda: types(link) == ["contribution"], "the contribution applied")
        await until(lambda: len(journal(t, "link_result")) == 1 and outbox_empty(t), "result")
        (sent,) = journal(t, "link_sent")
        assert sent["message"]["wagers"] == [{"count": 2, "meter": "main", "units": 2_000_000}]
        assert link.meter_units() == 1_000_300_000  # the link applied its own rate
        await until(
            lambda: any(m["cents"] == 100_030 for m in t.sub.meters("main")), "link value shown"
        )
        await t.press("S3", "H1")
        keyed = await t.sub.wait_event("award_keyed")
        assert keyed["cents"] == 100_030
        await until(lambda: any(m["state"] == "pending" for m in t.sub.meters("main")), "PENDING")
        await supervisor(t, "OK")
        confirmed = await t.sub.wait_event("award_confirmed")
        assert confirmed["cents"] == 100_030
        await t.press("RECON")
        await t.sub.wait_event("round_reconciled")
        await until(lambda: types(link) == ["contribution", "claim", "claim_confirm"], "all")
        await until(lambda: outbox_empty(t), "outbox drained")
        results = journal(t, "link_result")
        assert [r["seq"] for r in results] == [1, 2, 3]
        assert results[2]["result"]["awards"][0]["state"] == "paid"
    assert verify(tmp_path / "ledger.db", replay=True).ok


async def test_reject_and_void_send_a_reject_and_a_reversal(tmp_path: Path) -> None:
    async with linked(tmp_path) as (t, link):
        await t.bets(2)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        await t.press("S2", "H1")
        await t.sub.wait_event("award_keyed")
        await supervisor(t, "NO")
        await t.sub.wait_event("award_rejected")
        await supervisor(t, "VOID", "OK")
        await t.sub.wait_event("round_voided")
        want = ["contribution", "claim", "claim_reject", "reversal"]
        await until(lambda: types(link) == want, "reject and reversal applied")
        await until(lambda: outbox_empty(t), "outbox drained")
        statuses = [(r["type"], r["status"]) for r in journal(t, "link_result")]
        assert statuses == [(k, "applied") for k in want]
    assert verify(tmp_path / "ledger.db", replay=True).ok


async def test_link_down_closes_the_linked_meter_and_messages_drain(tmp_path: Path) -> None:
    async with linked(tmp_path) as (t, link):
        link.down = True
        await t.bets(1)
        await t.press("LOCK")  # locked before the table notices: its contribution waits
        await t.sub.wait_event("round_locked")
        await t.sub.wait(
            lambda: any(e["reason"] == "link-down" for e in t.sub.events("table_closed")),
            "closed: link-down",
        )
        await until(lambda: t.sub.meters("main")[-1]["state"] == "closed", "sign CLOSED")
        assert not outbox_empty(t)
        await t.press("RECON")
        await t.sub.wait_event("round_reconciled")
        await t.bets(1, 2)
        await t.press("LOCK")  # the local meter still plays; the linked one does not
        await t.sub.wait_event("round_locked", count=2)
        await t.press("S1", "H1")
        refused = await t.sub.wait_event("command_rejected")
        assert refused["code"] == "link-closed"
        await t.press("RECON")
        await t.sub.wait_event("round_reconciled", count=2)
        link.down = False
        await t.sub.wait(
            lambda: any(e["reason"] == "link-down" for e in t.sub.events("table_opened")),
            "reopened",
        )
        await until(lambda: outbox_empty(t), "the outbox drains when the link returns")
        assert types(link) == ["contribution"]  # the round locked while down sent none
    assert verify(tmp_path / "ledger.db", replay=True).ok


async def test_a_table_killed_with_a_pending_claim_resends_and_nothing_doubles(
    tmp_path: Path,
) -> None:
    async with linked(tmp_path) as (t, link):
        link.duplicate = True  # every reply twice: repeats are ignored
        await t.bets(4)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        await until(lambda: outbox_empty(t) and len(journal(t, "link_result")) == 1, "applied")
        link.down = True
        await t.press("S4", "H1")
        await until(lambda: len(journal(t, "link_sent")) == 2, "the claim journaled")
        await until(lambda: t.sub.meters("main")[-1]["state"] == "pending", "PENDING")
        t.kill(signal.SIGKILL)
        link.down = False
        t.start_daemon()
        await t.online(count=2)
        keyed = await t.sub.wait_event("award_keyed", timeout=20)
        assert keyed["seat"] == 4 and keyed["cents"] == 100_015
        await until(lambda: outbox_empty(t), "drained after the restart")
        assert types(link) == ["contribution", "claim"]  # each applied once
        assert [r["seq"] for r in journal(t, "link_result")] == [1, 2]
    assert verify(tmp_path / "ledger.db", replay=True).ok


async def test_a_refusal_that_consumed_no_sequence_is_not_final(tmp_path: Path) -> None:
    """A ``refused`` result with ``lseq`` 0 (here ``too-old``) did not consume the sequence
    at the link: the table keeps the message, journals no answer, says so in an error line,
    and the message still applies once the link takes it (``conflict`` and the other
    refusals resending cannot cure close the linked meter: tests/test_link_refused.py)."""
    async with linked(tmp_path) as (t, link):
        link.down = True  # the link reads nothing: the contribution stays in the outbox
        await t.bets(1)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        await until(lambda: not outbox_empty(t), "the contribution waits")
        (seq, msg_id), *_ = rows(t, "SELECT seq, id FROM link_outbox")
        forged = Result(
            link="link-a", table=TABLE, seq=seq, id=msg_id, status="refused", code="too-old",
            reason="sequence 1 is older than the results kept", resend_from=0, lseq=0,
            head=LedgerHead(0, "0" * 64),
        )
        async with aiomqtt.Client(t.broker.host, t.broker.port) as client:
            await client.publish(f"progressive/link/link-a/to/{TABLE}", encode(forged), qos=1)
        await until(lambda: "without consuming its sequence" in t.log_text(), "the error line")
        assert not outbox_empty(t)
        assert journal(t, "link_result") == []
        link.down = False
        await until(lambda: outbox_empty(t), "applied once the link reads it")
        assert [r["status"] for r in journal(t, "link_result")] == ["applied"]
        assert types(link) == ["contribution"]
# --------------------------------------------------------------------------- seen from outside


def status(t: Table) -> dict[str, Any]:
    answer = request(t.tmp / "control.sock", {"action": "status"}, timeout=10)
    assert answer["ok"], answer
    found: dict[str, Any] = answer["status"]
    return found


def ctl_status(t: Table) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "progressived.cli.ctl",
            "status",
            "--socket",
            str(t.tmp / "control.sock"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def link_metrics(port: int) -> dict[str, float]:
    """The ``progressive_link_*`` samples (labels ``table`` and ``link`` checked), from an
    exposition promtool accepts."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    promtool = shutil.which("promtool")
    assert promtool, "promtool is installed by .ci/test (Debian package prometheus)"
    check = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("progressive_link_"):
                assert sample.labels == {"table": TABLE, "link": "link-a"}, sample
                out[sample.name] = sample.value
    return out


async def test_status_and_metrics_show_the_link_down_with_a_waiting_outbox_then_up(
    tmp_path: Path,
) -> None:
    port = free_port()
    async with linked(tmp_path, metrics_port=port) as (t, link):
        # Up: heartbeats arriving, nothing waiting, the linked meter as the link published it.
        up = await until(
            lambda: (
                (s := status(t))["link"]["up"]
                and s["link"]["meters"]["main"]["cents"] is not None
                and not s["link"]["closed"]
                and "link-down" not in s["closed"]
                and s
            ),
            "link up",
            in_thread=True,
        )
        assert up["link"]["id"] == "link-a" and up["link"]["broker_connected"]
        assert up["link"]["outbox"] == {"depth": 0, "oldest_s": None}
        assert up["link"]["closed"] is False and "link-down" not in up["closed"]
        assert up["link"]["meters"]["main"]["cents"] == link.meter_units() // 10_000
        assert up["meters"]["main"]["cents"] == up["link"]["meters"]["main"]["cents"]
        assert up["meters"]["main"]["link"] == "link-a" and "link" not in up["meters"]["side"]
        got = await asyncio.to_thread(link_metrics, port)
        assert got["progressive_link_up"] == 1 and got["progressive_link_closed"] == 0
        assert got["progressive_link_outbox_depth"] == 0
        assert got["progressive_link_outbox_oldest_seconds"] == 0
        assert got["progressive_link_heartbeat_age_seconds"] < 2
        text = await asyncio.to_thread(ctl_status, t)
        assert "link link-a: up since" in text and "outbox: 0 awaiting" in text, text

        # The link stops: a LOCK's contribution waits in the outbox; the link goes down.
        link.down = True
        await t.bets(1, 2)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        down = await until(
            lambda: not (s := status(t))["link"]["up"] and s["link"]["closed"] and s,
            "link down",
            in_thread=True,
        )
        assert down["link"]["outbox"]["depth"] == 1
        assert down["link"]["outbox"]["oldest_s"] is not None
        assert down["link"]["outbox"]["oldest_s"] >= 0
        assert down["link"]["since"] > up["link"]["since"]
        assert "link-down" in down["closed"]
        assert down["meters"]["main"]["state"] == "closed"
        assert down["meters"]["side"]["state"] == "open"  # the local meter still plays
        got = await asyncio.to_thread(link_metrics, port)
        assert got["progressive_link_up"] == 0 and got["progressive_link_closed"] == 1
        assert got["progressive_link_outbox_depth"] == 1
        assert got["progressive_link_outbox_oldest_seconds"] > 0
        assert got["progressive_link_heartbeat_age_seconds"] > 0.6  # 3 missed at 0.2 s
        text = await asyncio.to_thread(ctl_status, t)
        assert "link link-a: DOWN since" in text and "outbox: 1 awaiting" in text, text
        assert "CLOSED at this table (link-down)" in text, text

        # The link returns: up again, the outbox drains (sent again: a resend counted).
        link.down = False
        back = await until(
            lambda: (s := status(t))["link"]["up"]
            and s["link"]["outbox"]["depth"] == 0
            and not s["link"]["closed"]
            # the link's meter after applying the contribution (its own message, after the
            # result) has reached the table
            and s["link"]["meters"]["main"]["lseq"] > up["link"]["meters"]["main"]["lseq"]
            and s,
            "link back, outbox drained",
            in_thread=True,
        )
        assert back["link"]["closed"] is False and back["link"]["outbox"]["oldest_s"] is None
        assert back["link"]["resends"] >= 1
        assert back["link"]["meters"]["main"]["lseq"] > up["link"]["meters"]["main"]["lseq"]
        assert back["link"]["meters"]["main"]["cents"] == link.meter_units() // 10_000
        got = await until(
            lambda: (m := link_metrics(port))["progressive_link_up"] == 1
            and m["progressive_link_closed"] == 0
            and m,
            "metrics up", in_thread=True
        )
        assert got["progressive_link_outbox_depth"] == 0 and got["progressive_link_closed"] == 0
        assert got["progressive_link_resends_total"] >= 1
        assert types(link) == ["contribution"]
    assert verify(tmp_path / "ledger.db", replay=True).ok
