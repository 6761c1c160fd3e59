"""Outages of the broker and the board while the table plays.

Broker: killed (SIGKILL) and restarted, frozen (SIGSTOP) and thawed, stopped cleanly and
restarted — with rounds played during the outage. Afterwards every engine event the ledger
holds reached the independent sign (the outbox kept them) and the ledger verifies.
Board: unplugged (the pty closed) and frozen (silent): the progressive closes (meter state
``closed``, LOCK not possible), and after replug / thaw a complete round plays.
"""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path

import pytest

from tests.reliability.rig import (
    OUTAGES,
    SEED,
    TALLY,
    check_all_published,
    check_nothing_acknowledged_lost,
    ctl_verify,
    random_play,
    rig,
    scripted_round,
)

pytestmark = pytest.mark.reliability


@pytest.mark.timeout(3600)
async def test_broker_killed_frozen_and_restarted(tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    db = tmp_path / "ledger.db"
    async with rig(tmp_path) as t:
        t.start_daemon()
        await t.online()
        await scripted_round(t)
        await asyncio.sleep(1.5)  # the broker's autosave has the sign's session
        for _ in range(OUTAGES):
            for how in ("kill", "freeze", "stop"):
                rounds_before = len(t.sub.events("round_reconciled"))
                if how == "kill":
                    t.broker.stop(signal.SIGKILL)
                elif how == "freeze":
                    t.broker.freeze()
                else:
                    t.broker.stop()
                # Play through the outage: the daemon journals, the outbox holds the messages.
                for seat in (2, 5):
                    t.sim.place_bet(seat)
                await asyncio.sleep(0.3)
                t.sim.press("LOCK")
                await asyncio.sleep(0.3)
                for seat in (2, 5):
                    t.sim.remove_bet(seat)
                t.sim.press("S2")
                t.sim.press("H4")
                t.sim.press("RECON")
                await random_play(t, rng, 20, pause=0.05)
                await asyncio.sleep(rng.uniform(2.0, 7.0))  # past the 5 s keepalive, sometimes
                if how == "freeze":
                    t.broker.thaw()
                else:
                    t.broker.start()
                TALLY[f"broker_{how}_outages"] += 1
                await t.sub.wait(
                    lambda n=rounds_before: len(t.sub.events("round_reconciled")) > n,
                    "the round played during the outage reaches the sign",
                    timeout=60,
                )
                await scripted_round(t)
                await asyncio.sleep(1.5)
        await asyncio.sleep(1.0)
        check_all_published(t, db)
        TALLY["published_events_checked"] += check_nothing_acknowledged_lost(t, db)
        assert t.proc is not None and t.proc.poll() is None, "the daemon survived"
        assert t.kill(signal.SIGTERM) == 0
    ctl_verify(db)


@pytest.mark.timeout(3600)
async def test_board_unplugged_and_frozen(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    async with rig(tmp_path) as t:
        t.start_daemon()
        await t.online()
        await scripted_round(t)
        for _ in range(OUTAGES):
            for how in ("unplug", "freeze"):
                offline = len(t.sub.events("board_offline"))
                online = len(t.sub.events("board_online"))
                locked = len(t.sub.events("round_locked"))
                t.sim.place_bet(4)
                await asyncio.sleep(0.3)
                if how == "unplug":
                    t.sim.unplug()
                else:
                    t.sim.freeze()
                await t.sub.wait_event("board_offline", offline + 1, timeout=20)
                await t.sub.wait(
                    lambda: t.sub.meters()[-1]["state"] == "closed", "meter closed", timeout=10
                )
                if how == "freeze":
                    t.sim.press("LOCK")  # a frozen board sends nothing: the table cannot lock
                await asyncio.sleep(1.0)
                assert len(t.sub.events("round_locked")) == locked
                if how == "unplug":
                    t.sim.replug()
                else:
                    t.sim.thaw()
                await t.sub.wait_event("board_online", online + 1, timeout=30)
                await t.sub.wait(
                    lambda: t.sub.meters()[-1]["state"] == "open", "meter open", timeout=10
                )
                t.sim.remove_bet(4)
                TALLY[f"board_{how}_outages"] += 1
                await scripted_round(t)
        TALLY["published_events_checked"] += check_nothing_acknowledged_lost(t, db)
        assert t.kill(signal.SIGTERM) == 0
    ctl_verify(db)
