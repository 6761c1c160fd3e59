"""The daemon end to end: pty board simulator -> daemon process -> real Mosquitto -> a sign.

Default keypad codes: LOCK, S1..S7, tcp-sd-1 hands H1 akq-spades, H2 akq-suited,
H3 straight-flush, H4 three-of-a-kind, H5 straight; OK / NO (supervisor), RECON.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon_harness import TABLE, table

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)


def verify(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "progressived.cli.ctl", "ledger", "verify", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_complete_rounds_reach_an_independent_subscriber(tmp_path: Path) -> None:
    async with table(tmp_path) as t:
        t.start_daemon()
        await t.online()
        await t.bets(1, 3, 5)
        await t.press("LOCK")
        locked = await t.sub.wait_event("round_locked")
        assert locked["seats"] == [1, 3, 5]
        assert locked["table"] == TABLE
        await t.collect(1, 3, 5)
        await t.press("S5", "H5", "S3", "H1")
        keyed = await t.sub.wait_event("award_keyed")
        assert (keyed["seat"], keyed["hand"], keyed["cents"]) == (3, "akq-spades", 100_045)
        assert keyed["meter_before_cents"] == 100_045
        assert keyed["meter_after_cents"] == 100_006  # $1,000 seed + $0.06 reserve
        t.sim.supervisor(True)
        await asyncio.sleep(0.2)
        await t.press("OK")
        t.sim.supervisor(False)
        confirmed = await t.sub.wait_event("award_confirmed")
        assert confirmed["cents"] == 100_045
        await t.press("RECON")
        done = await t.sub.wait_event("round_reconciled")
        assert done["settlement"] == [
            {"seat": 5, "hand": "straight", "source": "tray", "cents": 600},
            {"seat": 3, "hand": "akq-spades", "source": "meter", "cents": 100_045},
            {"seat": 5, "hand": "akq-spades", "source": "envy", "cents": 10_000, "from_seat": 3},
            {"seat": 1, "hand": "akq-spades", "source": "envy", "cents": 10_000, "from_seat": 3},
        ]
        envy = t.sub.events("envy")
        assert sorted((e["seat"], e["cents"]) for e in envy) == [(1, 10_000), (5, 10_000)]
        await t.sub.wait(lambda: t.sub.meters()[-1]["cents"] == 100_006, "meter after reset")
        meter = t.sub.meters()[-1]
        assert meter["display"] == "$1,000.06"
        assert meter["state"] == "open"
        seqs = [e["seq"] for e in t.sub.events()]
        assert seqs == sorted(seqs)
        assert len(seqs) == len(set(seqs))
        # docs/mqtt.md: a meter's ts is never earlier than the rows up to its seq, and never
        # goes back from one meter message to the next within a run.
        stamps = [m["ts"] for m in t.sub.meters()]
        assert stamps == sorted(stamps)
        for m in t.sub.meters():
            assert all(e["ts"] <= m["ts"] for e in t.sub.events() if e["seq"] <= m["seq"]), m
        # A nonsense key sequence is refused and shown, and changes nothing.
        await t.press("H1")
        refused = await t.sub.wait_event("key_refused")
        assert refused["code"] == "H1"
        assert t.kill(signal.SIGTERM) == 0

        def last_status() -> str:
            status = [m for topic, m, _ in t.sub.messages if topic.endswith("/status")]
            return str(status[-1]["status"]) if status else ""

        await t.sub.wait(lambda: last_status() == "offline", "offline status after SIGTERM")
        statuses = [m for topic, m, _ in t.sub.messages if topic.endswith("/status")]
    # SIGTERM journaled the stop as the ledger's last row.
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        (last, seq, head_hash) = db.execute(
            "SELECT kind, seq, hash FROM journal ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    assert last == "daemon_stopped"
    assert verify(tmp_path / "ledger.db").returncode == 0
    # Every status carried the ledger's head; the offline one the head after the stop row,
    # and the ledger's chain passes through each head a subscriber recorded.
    online, offline = statuses[0], statuses[-1]
    assert online["status"] == "online" and 0 < online["head_seq"] < seq
    assert (offline["head_seq"], offline["head_hash"]) == (seq, head_hash)
    witnesses = [f"--head={m['head_seq']}:{m['head_hash']}" for m in (online, offline)]
    result = verify(tmp_path / "ledger.db", *witnesses)
    assert result.returncode == 0, result.stdout + result.stderr
    forged = verify(tmp_path / "ledger.db", f"--head={online['head_seq']}:{'0' * 64}")
    assert forged.returncode == 1 and "does not match" in forged.stdout


async def test_broker_restart_mid_round_loses_no_event(tmp_path: Path) -> None:
    async with table(tmp_path) as t:
        t.start_daemon()
        await t.online()
        await t.bets(2, 4)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        t.broker.stop()
        await t.collect(2, 4)
        await t.press("S2", "H2", "S4", "H4", "RECON")
        await asyncio.sleep(1.0)
        t.broker.start()
        done = await t.sub.wait_event("round_reconciled", timeout=30)
        pays = {(p["seat"], p["source"], p["cents"]) for p in done["settlement"]}
        assert pays == {(2, "tray", 50_000), (4, "tray", 6_000), (4, "envy", 2_500)}
        kinds = [e["kind"] for e in t.sub.events()]
        assert kinds.count("hand_keyed") == 2
        # The sign gets the current meter on reconnect: $1,000 + 2 x $0.15.
        await t.sub.wait(lambda: t.sub.meters() and t.sub.meters()[-1]["cents"] == 100_030, "meter")


async def test_sigkill_mid_round_resumes_the_round(tmp_path: Path) -> None:
    async with table(tmp_path) as t:
        t.start_daemon()
        await t.online()
        await t.bets(1, 6)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        await t.collect(1, 6)
        await t.press("S6", "H1")
        keyed = await t.sub.wait_event("award_keyed")
        await t.sub.wait(lambda: t.sub.meters()[-1]["state"] == "pending", "pending meter")
        award = {"seat": 6, "hand": keyed["hand"], "cents": keyed["cents"]}
        assert t.sub.meters()[-1]["pending"] == [award]
        before = len(t.sub.meters())
        t.kill(signal.SIGKILL)
        await asyncio.sleep(0.5)
        t.start_daemon()
        await t.online(2)
        # The new run sends no award_keyed again: a sign learns of the award still awaiting
        # the supervisor from the retained meter alone.
        await t.sub.wait(
            lambda: len(t.sub.meters()) > before and t.sub.meters()[-1]["pending"] == [award],
            "the pending award on the republished meter",
        )
        # The award awaiting the supervisor survived; the supervisor confirms it now.
        t.sim.supervisor(True)
        await asyncio.sleep(0.2)
        await t.press("OK")
        t.sim.supervisor(False)
        confirmed = await t.sub.wait_event("award_confirmed")
        assert confirmed["cents"] == keyed["cents"] == 100_030
        await t.press("RECON")
        done = await t.sub.wait_event("round_reconciled")
        assert [(p["seat"], p["source"]) for p in done["settlement"]] == [(6, "meter"), (1, "envy")]
    result = verify(tmp_path / "ledger.db")
    assert result.returncode == 0, result.stdout + result.stderr


async def test_last_will_seen_by_plain_mosquitto_sub(tmp_path: Path) -> None:
    async with table(tmp_path, persistence=False) as t:
        t.start_daemon()
        await t.online()
        topic = f"progressive/table/{TABLE}/status"
        sub = subprocess.Popen(
            [
                "mosquitto_sub",
                "-h",
                t.broker.host,
                "-p",
                str(t.broker.port),
                "-t",
                topic,
                "-C",
                "2",
                "-v",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        await asyncio.sleep(0.5)  # the retained "online" arrives first
        t.kill(signal.SIGKILL)
        out, _ = await asyncio.to_thread(sub.communicate, timeout=20)
        lines = out.strip().splitlines()
        assert '"status":"online"' in lines[0]
        assert '"status":"offline"' in lines[1]
        # The last will carries the ledger's head as it was when the daemon connected.
        will = json.loads(lines[1].split(" ", 1)[1])
        assert will["head_seq"] > 0 and len(will["head_hash"]) == 64


async def test_offline_board_closes_the_progressive(tmp_path: Path) -> None:
    async with table(tmp_path) as t:
        t.start_daemon()
        await t.online()
        await t.bets(3)
        t.sim.unplug()
        await t.sub.wait_event("board_offline", timeout=20)
        await t.sub.wait(lambda: t.sub.meters()[-1]["state"] == "closed", "closed meter")
        assert t.sub.meters()[-1]["closed"] == ["board offline"]
        t.sim.replug()
        await t.online(2)
        await t.sub.wait(lambda: t.sub.meters()[-1]["state"] == "open", "open again")
        assert t.sub.meters()[-1]["closed"] == []
        await t.press("LOCK")
        locked = await t.sub.wait_event("round_locked")
        assert locked["seats"] == [3]
