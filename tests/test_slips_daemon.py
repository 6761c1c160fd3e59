"""The daemon's payout slips end to end: a jackpot's slip journaled with its award, the
daemon SIGKILLed before the printer could print it (switched off), and every copy printed
exactly once after the restart, the rest of the round's slips too; the status shows the
queue."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from progressived.runtime.control import request
from progressived.testing.board import simulator_factory
from progressived.testing.receipt_printer import TestPrinter
from progressived.testing.rig import table
from progressived.testing.waits import until
from tests.daemon_harness import harness_config
from tests.mqtt_schemas import problems

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)


def issued(db: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT json_extract(data, '$.serial') FROM journal WHERE kind = 'slip_issued' "
            "ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()
    return [str(serial) for (serial,) in rows]


async def test_a_slip_killed_before_its_print_prints_once_after_restart(tmp_path: Path) -> None:
    with TestPrinter() as printer:
        printer.stop()  # off: the award's slip stays queued in the ledger
        config = replace(
            harness_config(),
            slip_printer={"host": "127.0.0.1", "port": printer.port, "retry_s": 0.2},
        )
        board = simulator_factory(heartbeat_interval_s=0.2)
        async with table(tmp_path, config, board=board, sign="slips-sign", check=problems) as t:
            db = tmp_path / "ledger.db"
            t.start_daemon()
            await t.online()
            await t.bets(1, 3, 5)
            await t.press("LOCK")
            await t.sub.wait_event("round_locked")
            await t.collect(1, 3, 5)
            await t.press("S3", "H1")  # AKQ spades at seat 3: 100% of the meter
            await t.sub.wait_event("award_keyed")
            t.sim.supervisor(True)
            await asyncio.sleep(0.2)
            await t.press("OK")
            t.sim.supervisor(False)
            await t.sub.wait_event("award_confirmed")
            assert issued(db) == ["it-1-000001"]  # in the award's transaction

            def queued() -> bool:
                answer = request(tmp_path / "control.sock", {"action": "status"})
                slips = answer["status"].get("slips", {})
                return slips.get("unprinted") == 2 and slips.get("state") == "unreachable"

            await until(queued, "the status shows the queue", in_thread=True)
            assert t.kill(signal.SIGKILL) == -signal.SIGKILL
            printer.start()
            t.start_daemon()
            await t.online()
            await until(lambda: len(printer.receipts()) == 2, "the original and the duplicate")
            await t.press("RECON")
            await t.sub.wait_event("round_reconciled")
            serials = issued(db)
            assert len(serials) == 3  # the meter award, and seats 1 and 5 envy seat 3
            await until(lambda: len(printer.receipts()) == 6, "every slip's two copies")
            await asyncio.sleep(0.5)  # nothing more comes
            assert t.kill(signal.SIGTERM) == 0
    copies = {"ORIGINAL", "DUPLICATE"}
    printed = [
        (r.qr[0].split()[1], next(line.strip() for line in r.lines if line.strip() in copies))
        for r in printer.receipts()
    ]
    expected = [(s, copy) for s in serials for copy in ("ORIGINAL", "DUPLICATE")]
    assert sorted(printed) == sorted(expected)
