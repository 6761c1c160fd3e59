"""A table daemon with a linked meter against the fake link, on a real Mosquitto.

pmg-01 at table it-1: meter ``main`` linked to ``link-a`` (the fake link: the pure book in
memory, heartbeats every 0.2 s), a local meter ``side``. Keypad: H1 royal flush.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiomqtt

from progressived.ledger.verify import verify
from progressived.link.messages import Head, Result, decode_table, encode
from progressived.testing.board import simulator_factory
from progressived.testing.config import RigConfig
from progressived.testing.fake_link import FakeLink
from progressived.testing.rig import Table
from progressived.testing.rig import table as rig_table
from tests.daemon_harness import TABLE


def linked_config() -> RigConfig:
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
    )


@contextlib.asynccontextmanager
async def linked(tmp: Path) -> AsyncIterator[tuple[Table, FakeLink]]:
    async with (
        rig_table(
            tmp, linked_config(), board=simulator_factory(heartbeat_interval_s=0.2), sign="it-sign"
        ) as t,
        FakeLink(t.broker.host, t.broker.port, tables=(TABLE,)) as link,
    ):
        t.start_daemon()
        await t.online()
        yield t, link


def rows(t: Table, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{t.tmp / 'ledger.db'}?mode=ro", uri=True)
    try:
        return list(conn.execute(sql, args).fetchall())
    finally:
        conn.close()


def journal(t: Table, kind: str) -> list[dict[str, Any]]:
    found = rows(t, "SELECT data FROM journal WHERE kind = ? ORDER BY seq", (kind,))
    return [json.loads(d) for (d,) in found]


async def until(check: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)
    assert check(), what


def outbox_empty(t: Table) -> bool:
    return rows(t, "SELECT count(*) FROM link_outbox")[0][0] == 0


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
    """A ``refused`` result with ``lseq`` 0 (conflict, head-regressed, ...) did not consume
    the sequence at the link: the table keeps the message, journals no answer, says so in
    an error line, and the message still applies once the link takes it."""
    async with linked(tmp_path) as (t, link):
        link.down = True  # the link reads nothing: the contribution stays in the outbox
        await t.bets(1)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        await until(lambda: not outbox_empty(t), "the contribution waits")
        (seq, msg_id), *_ = rows(t, "SELECT seq, id FROM link_outbox")
        forged = Result(
            link="link-a", table=TABLE, seq=seq, id=msg_id, status="refused", code="conflict",
            reason="sequence used by a different message", resend_from=0, lseq=0,
            head=Head(0, "0" * 64),
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
