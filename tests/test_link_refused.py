"""A linked meter the link refuses, or has not published yet, as the table shows it.

The table daemon (pmg-01, linked meter ``main`` and a local meter ``side``) against the
fake link on a real Mosquitto, as in tests/test_link_table_daemon.py:

* a linked meter the table has not heard from the link is published ``closed`` with
  ``waiting for link``, never ``open`` at $0.00, and opens with the link's value;
* a link that has no meter of that name refuses the first contribution (``unknown-meter``,
  final): the table journals the closure with the result, its sign shows CLOSED and why,
  ``progressivectl status`` and the metrics say so, one error line is logged; the local
  meter plays on; a restart remembers; ``progressivectl open`` ends it;
* a refusal that consumed nothing and that resending cannot cure (``conflict``) closes it
  too, and the message stays in the outbox.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from progressived.ledger.verify import verify
from progressived.link.core.messages import LedgerHead, Result, encode
from progressived.runtime.control import request
from progressived.testing.board import simulator_factory
from progressived.testing.broker import free_port
from progressived.testing.fake_link import FakeLink
from progressived.testing.rig import table as rig_table
from progressived.testing.waits import until
from tests.daemon_harness import TABLE
from tests.test_ledger_audit import run as audit
from tests.test_link_table_daemon import (
    ctl_status,
    journal,
    link_metrics,
    linked,
    linked_config,
    outbox_empty,
    rows,
    status,
    table_problems,
)

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)

REFUSED = "link refused: unknown-meter"


def last_meter(t: Any, meter: str = "main") -> dict[str, Any]:
    found: dict[str, Any] = t.sub.meters(meter)[-1]
    return found


async def test_a_linked_meter_never_heard_from_is_shown_waiting_never_open_at_zero(
    tmp_path: Path,
) -> None:
    async with rig_table(
        tmp_path,
        linked_config(),
        board=simulator_factory(heartbeat_interval_s=0.2),
        sign="it-sign",
        check=table_problems,
    ) as t:
        t.start_daemon()
        await t.online()
        # two meters, two messages: the local one may come after the linked one
        await until(
            lambda: bool(t.sub.meters("main")) and bool(t.sub.meters("side")),
            "the linked and the local meter published",
        )
        waiting = last_meter(t)
        assert waiting["state"] == "closed" and "waiting for link" in waiting["closed"]
        assert (waiting["cents"], waiting["link"]) == (0, {"id": "link-a", "epoch": 0, "lseq": 0})
        side = last_meter(t, "side")  # a local meter does not wait for the link
        assert side["state"] == "open" and "waiting for link" not in side["closed"]
        shown = await asyncio.to_thread(status, t)
        assert shown["meters"]["main"]["state"] == "closed"
        assert shown["link"]["meters"]["main"]["cents"] is None
        async with FakeLink(t.broker.host, t.broker.port, tables=(TABLE,)):
            await until(lambda: last_meter(t)["state"] == "open", "open with the link's value")
            heard = last_meter(t)
            assert heard["cents"] == 100_000 and "waiting for link" not in heard["closed"]
        assert not t.sub.problems, t.sub.problems
        shown_open = [m for m in t.sub.meters("main") if m["state"] == "open"]
        assert all(m["cents"] == 100_000 for m in shown_open)  # never an open $0.00


async def test_a_meter_the_link_does_not_have_closes_the_linked_meter_until_opened(
    tmp_path: Path,
) -> None:
    port = free_port()
    # The link calls its meter "pmg"; the table's meter "main" names no link_meter.
    async with linked(tmp_path, metrics_port=port, meter="pmg") as (t, link):
        await t.bets(1, 3)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        await until(lambda: REFUSED in last_meter(t)["closed"], "CLOSED, and why, on the sign")
        assert last_meter(t)["state"] == "closed"
        assert last_meter(t, "side")["state"] == "open"  # the local meter plays on
        (result,) = journal(t, "link_result")
        assert (result["status"], result["code"]) == ("refused", "unknown-meter")
        assert outbox_empty(t)  # final: the contribution consumed its sequence
        closed = rows(t, "SELECT seq, actor, data FROM journal WHERE kind = 'table_closed'")
        ours = [(seq, actor) for seq, actor, data in closed if json.loads(data)["reason"] == REFUSED]
        result_seq = rows(t, "SELECT seq FROM journal WHERE kind = 'link_result'")[0][0]
        assert ours == [(result_seq - 1, "link")]  # journaled in the result's transaction
        await t.sub.wait(
            lambda: any(e["reason"] == REFUSED for e in t.sub.events("table_closed")),
            "the table_closed event",
        )

        shown = await asyncio.to_thread(status, t)
        assert shown["link"]["closed"] is True
        assert shown["link"]["refused"] == {
            "code": "unknown-meter",
            "reason": "link link-a has no meter main",
        }
        # Degraded: not healthy for monitoring, but the watchdog pings (a restart would not
        # cure it).
        assert shown["healthy"] is False
        assert shown["health"].startswith("degraded: the linked progressive is closed")
        assert t.proc is not None and t.proc.poll() is None
        assert REFUSED in shown["closed"] and shown["meters"]["main"]["state"] == "closed"
        got = await asyncio.to_thread(link_metrics, port)
        assert got["progressive_link_refused"] == 1 and got["progressive_link_closed"] == 1
        text = await asyncio.to_thread(ctl_status, t)
        assert "the link refused it (unknown-meter: link link-a has no meter main)" in text
        assert "health: degraded" in text, text
        assert t.log_text().count("resending cannot help") == 1
        # docs/ledger.md's recipe finds the closure standing, from the ledger alone
        ledger = tmp_path / "ledger.db"
        assert await asyncio.to_thread(audit, "closures", ledger) == f"{REFUSED}\n"

        # Another round: the local meter locks, the linked one sends nothing.
        await t.press("RECON")
        await t.sub.wait_event("round_reconciled")
        await t.bets(2)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked", count=2)
        await t.press("RECON")
        await t.sub.wait_event("round_reconciled", count=2)
        assert len(link.applied_for(TABLE)) == 1 and len(journal(t, "link_sent")) == 1

        # A restart remembers (the ledger); an operator opens it once it is fixed.
        t.stop_daemon()
        t.start_daemon()
        await t.online(count=2)
        again = await until(lambda: (s := status(t))["link"]["refused"] and s, "refused", in_thread=True)
        assert again["link"]["refused"] == {"code": "unknown-meter", "reason": ""}
        opened = await asyncio.to_thread(
            request,
            t.tmp / "control.sock",
            {"action": "open", "operator": "ops-7", "reason": "link_meter fixed"},
        )
        assert opened["ok"] and REFUSED not in opened["closed"], opened
        reopened = journal(t, "table_opened")
        assert any(r["reason"] == REFUSED for r in reopened)
        after = await asyncio.to_thread(status, t)
        assert after["link"]["refused"] is None and after["link"]["closed"] is False
        assert await asyncio.to_thread(audit, "closures", ledger) == ""
        assert after["health"] == "ok"
        got = await asyncio.to_thread(link_metrics, port)
        assert got["progressive_link_refused"] == 0
        # Never heard from under "main": still shown waiting, not open.
        assert last_meter(t)["state"] == "closed" and "waiting for link" in last_meter(t)["closed"]
    assert verify(tmp_path / "ledger.db", replay=True).ok


async def test_a_conflict_that_resending_cannot_cure_closes_it_and_the_message_waits(
    tmp_path: Path,
) -> None:
    async with linked(tmp_path) as (t, link):
        link.down = True  # the link reads nothing: the contribution stays in the outbox
        await t.bets(1)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        await until(lambda: not outbox_empty(t), "the contribution waits")
        (seq, msg_id), *_ = rows(t, "SELECT seq, id FROM link_outbox")
        refusal = {
            "link": "link-a", "table": TABLE, "status": "refused", "code": "conflict",
            "reason": "sequence 1 was used by a different message", "resend_from": 0,
            "lseq": 0, "head": LedgerHead(0, "0" * 64),
        }  # fmt: skip
        async with aiomqtt.Client(t.broker.host, t.broker.port) as client:
            topic = f"progressive/link/link-a/to/{TABLE}"
            # One for a message the table never sent: ignored (an error line, no closure).
            stray = Result(seq=seq + 5, id=f"{TABLE}:{seq + 5}", **refusal)
            await client.publish(topic, encode(stray), qos=1)
            await until(lambda: "disagree" in t.log_text(), "the stray refusal logged")
            reasons = [r["reason"] for r in journal(t, "table_closed")]
            assert "link refused: conflict" not in reasons
            await client.publish(topic, encode(Result(seq=seq, id=msg_id, **refusal)), qos=1)
        await until(
            lambda: "link refused: conflict" in last_meter(t)["closed"], "CLOSED: conflict"
        )
        # (a link-down closure may follow on a loaded machine: the fake link's heartbeats are
        # not this test's subject, so the refusal's row is looked for, not the last one)
        assert "link refused: conflict" in [r["reason"] for r in journal(t, "table_closed")]
        assert journal(t, "link_result") == [] and not outbox_empty(t)  # not final
        shown = await asyncio.to_thread(status, t)
        assert shown["link"]["refused"]["code"] == "conflict" and shown["link"]["closed"]
        # Its own advice: the ledgers disagree, no configuration to fix (docs/link.md).
        assert shown["health"].startswith("degraded: the linked progressive is closed")
        assert "the table's ledger and the link's record of it disagree" in shown["health"]
        assert "progressivectl link reconcile" in shown["health"]
        assert "fix the configuration" not in shown["health"]
        text = await asyncio.to_thread(ctl_status, t)
        assert "fix the configuration" not in text and "link reconcile" in text, text
        assert t.log_text().count("resending cannot help") == 1
