"""The web sign in a real browser: headless Chromium looking at ``progressivectl sign --web``
fed by a real daemon, a real Mosquitto and the pty board simulator (tests/daemon_harness.py).

One table's life, each state followed by its recovery: the meter after LOCK, PENDING on a
keyed 100% award (hand, amount, table, seat), the winner celebration then the new value,
the round's envy line cleared by the next round's LOCK, CLOSED when the board is unplugged,
STALE while the broker is frozen, and the page riding through a sign server restart and a
browser reload. Names come from the sign's file and the paytable: no id is ever on screen.
With PROGRESSIVE_SIGN_SCREENSHOTS=1 the screenshots land in docs/sign/.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_harness import TABLE, table
from tests.websign_harness import WebSign, browsers, screenshots, sign_servers, until_shown

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)

__all__ = ["browsers", "sign_servers"]  # the fixtures this module uses

SIGN_FILE = f"""
[sign]
odometer_ms = 300

[[sign.tables]]
id = "{TABLE}"
name = "Table 7"
paytable = "tcp-sd-1"
"""


def main(page: dict[str, Any]) -> dict[str, str]:
    meters = page["meters"]
    found = meters.get("main", {"amount": "", "state": ""})
    return {"amount": found["amount"], "state": found["state"]}


async def test_the_page_follows_a_table_through_every_state(
    tmp_path: Path, sign_servers: Callable[..., WebSign], browsers: Callable[..., Any]
) -> None:
    shots = screenshots(tmp_path)
    config = tmp_path / "sign.toml"
    config.write_text(SIGN_FILE)
    async with table(tmp_path) as t:
        t.start_daemon()
        sign = await sign_servers(t.broker.port, config=config).start()
        driver = browsers(1920, 1080)
        await asyncio.to_thread(driver.get, sign.url(f"/table/{TABLE}"))
        await t.online()
        await until_shown(driver, TABLE, lambda p: main(p)["amount"] == "$1,000.00", "the seed")
        # LOCK with three bets: $1,000 + 3 x $0.15, rolled up to the exact cent.
        await t.bets(1, 3, 5)
        await t.press("LOCK")
        page = await until_shown(
            driver,
            TABLE,
            lambda p: main(p) == {"amount": "$1,000.45", "state": "open"},
            "the meter after LOCK, OPEN",
        )
        assert page["title"] == "Three Card Poker Progressive" and page["where"] == "Table 7"
        assert TABLE not in page["text"]

        # A keyed 100% award: PENDING with the hand's name, the award, the table and the seat.
        await t.collect(1, 3, 5)
        await t.press("S5", "H5", "S3", "H1")
        page = await until_shown(driver, TABLE, lambda p: main(p)["state"] == "pending", "PENDING")
        assert page["pending"] == [
            "JACKPOT PENDING AKQ Spades $1,000.45 Table 7 · Seat 3"
        ]
        assert main(page)["amount"] == "$1,000.06"  # reset to seed + reserve at once
        assert page["state"] == "pending"
        await asyncio.to_thread(driver.save_screenshot, str(shots / "pending.png"))

        # Confirmed: the winner celebration with hand, amount, table and asset number.
        t.sim.supervisor(True)
        await asyncio.sleep(0.2)
        await t.press("OK")
        t.sim.supervisor(False)
        page = await until_shown(driver, TABLE, lambda p: bool(p["banner"]), "the winner banner")
        banner = " ".join(str(page["banner"]).split())
        assert banner == f"WINNER AKQ SPADES $1,000.45 Table 7 · Seat 3 Table asset number {TABLE}"
        assert not page["pending"]
        await asyncio.to_thread(driver.save_screenshot, str(shots / "winner.png"))
        # ...held for --banner-s (4 s), then the new value; the round's envy after RECONCILE.
        await t.press("RECON")
        page = await until_shown(driver, TABLE, lambda p: not p["banner"], "the banner ending", 8)
        page = await until_shown(driver, TABLE, lambda p: len(p["envy"]) == 2, "the round's envy")
        assert sorted(page["envy"]) == [
            "Seat 1 wins $100.00 · AKQ Spades at Seat 3",
            "Seat 5 wins $100.00 · AKQ Spades at Seat 3",
        ]
        assert main(page) == {"amount": "$1,000.06", "state": "open"}
        await asyncio.to_thread(driver.save_screenshot, str(shots / "envy.png"))
        # The next round's LOCK clears the last round's envy line.
        await t.bets(2)
        await t.press("LOCK")
        page = await until_shown(driver, TABLE, lambda p: not p["envy"], "the envy line cleared")
        await until_shown(driver, TABLE, lambda p: main(p)["amount"] == "$1,000.21", "the next LOCK")

        # The board unplugged: CLOSED, dimmed, and why in words; plugged back: OPEN.
        t.sim.unplug()
        page = await until_shown(driver, TABLE, lambda p: main(p)["state"] == "closed", "CLOSED", 20)
        assert page["why"] == "CLOSED Progressive closed · back shortly"
        await asyncio.to_thread(driver.save_screenshot, str(shots / "closed.png"))
        t.sim.replug()
        await until_shown(driver, TABLE, lambda p: main(p)["state"] == "open", "OPEN again", 20)

        # The broker frozen: STALE (the meter alternates with the fault), thawed: live.
        assert t.broker.proc is not None
        frozen = time.monotonic()
        t.broker.proc.send_signal(signal.SIGSTOP)
        try:
            # --keepalive-s 1: unanswered pings drop the link within about 2 s (+1 s).
            page = await until_shown(driver, TABLE, lambda p: p["stale"], "STALE", 12)
            print(f"STALE {time.monotonic() - frozen:.1f} s after the broker froze")
            assert page["staleWhy"] == "Jackpot meter updating soon"  # for players
            assert "broker" in page["staleDetail"]  # for staff, off the glass
            await asyncio.to_thread(driver.save_screenshot, str(shots / "stale.png"))
        finally:
            t.broker.proc.send_signal(signal.SIGCONT)
        await until_shown(
            driver,
            TABLE,
            lambda p: not p["stale"] and main(p) == {"amount": "$1,000.21", "state": "open"},
            "live again after the broker thawed",
            25,
        )

        # The sign server restarted: the page reconnects by itself, no reload.
        assert sign.stop() == 0
        await until_shown(driver, TABLE, lambda p: p["stale"], "STALE without a server", 8)
        await sign.start()
        await until_shown(
            driver,
            TABLE,
            lambda p: not p["stale"] and main(p)["amount"] == "$1,000.21",
            "the meter after the server restart",
            15,
        )
        # A browser reload: the full picture again at once.
        await asyncio.to_thread(driver.refresh)
        await until_shown(driver, TABLE, lambda p: main(p)["amount"] == "$1,000.21", "after reload")
