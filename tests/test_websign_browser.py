"""The web sign in a real browser: headless Chromium looking at ``progressivectl sign --web``
fed by a real daemon, a real Mosquitto and the pty board simulator (tests/daemon_harness.py).

One table's life, each state followed by its recovery: the meter after LOCK, PENDING on a
keyed 100% award, the winner banner then the new value, CLOSED when the board is unplugged,
STALE while the broker is frozen, and the page riding through a sign server restart and a
browser reload. With PROGRESSIVE_SIGN_SCREENSHOTS=1 the screenshots land in docs/sign/.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from pathlib import Path

from tests.daemon_harness import TABLE, table
from tests.websign_harness import WebSign, browser, screenshots, until


async def test_the_page_follows_a_table_through_every_state(tmp_path: Path) -> None:
    shots = screenshots(tmp_path)
    async with table(tmp_path) as t:
        t.start_daemon()
        sign = await WebSign(t.broker.port, tmp_path).start()
        driver = await asyncio.to_thread(browser)
        try:
            await asyncio.to_thread(driver.get, sign.url(f"/table/{TABLE}"))
            await t.online()

            def main(page: dict[str, object]) -> dict[str, str]:
                meters = page["meters"]
                assert isinstance(meters, dict)
                return dict(meters.get("main", {"amount": "", "state": ""}))

            await until(driver, TABLE, lambda p: main(p)["amount"] == "$1,000.00", "the seed")
            # LOCK with three bets: $1,000 + 3 x $0.15.
            await t.bets(1, 3, 5)
            await t.press("LOCK")
            await until(
                driver,
                TABLE,
                lambda p: main(p) == {"amount": "$1,000.45", "state": "open"},
                "the meter after LOCK, OPEN",
            )
            await asyncio.to_thread(driver.save_screenshot, str(shots / "open.png"))

            # A keyed 100% award: PENDING with the award awaiting the supervisor.
            await t.collect(1, 3, 5)
            await t.press("S5", "H5", "S3", "H1")
            page = await until(driver, TABLE, lambda p: main(p)["state"] == "pending", "PENDING")
            assert page["pending"] and "seat 3" in page["pending"][0]
            assert "$1,000.45" in page["pending"][0] and "akq-spades" in page["pending"][0]
            assert main(page)["amount"] == "$1,000.06"  # reset to seed + reserve at once
            await asyncio.to_thread(driver.save_screenshot, str(shots / "pending.png"))

            # Confirmed: the winner banner with table, seat and amount; envy after RECON.
            t.sim.supervisor(True)
            await asyncio.sleep(0.2)
            await t.press("OK")
            t.sim.supervisor(False)
            page = await until(driver, TABLE, lambda p: bool(p["banner"]), "the winner banner")
            banner = " ".join(str(page["banner"]).split())
            assert f"TABLE {TABLE}" in banner and "SEAT 3" in banner and "$1,000.45" in banner
            assert not page["pending"]
            await t.press("RECON")
            page = await until(driver, TABLE, lambda p: len(p["envy"]) == 2, "the round's envy")
            assert sorted(" ".join(e.split()[:3]) for e in page["envy"]) == [
                "seat 1 $100.00",
                "seat 5 $100.00",
            ]
            await asyncio.to_thread(driver.save_screenshot, str(shots / "winner.png"))
            # ...held for --banner-s (4 s), then the new value.
            page = await until(driver, TABLE, lambda p: not p["banner"], "the banner ending", 8)
            assert main(page) == {"amount": "$1,000.06", "state": "open"}

            # The board unplugged: CLOSED, and why; plugged back: OPEN.
            t.sim.unplug()
            page = await until(driver, TABLE, lambda p: main(p)["state"] == "closed", "CLOSED", 20)
            assert "board offline" in page["why"]
            await asyncio.to_thread(driver.save_screenshot, str(shots / "closed.png"))
            t.sim.replug()
            await until(driver, TABLE, lambda p: main(p)["state"] == "open", "OPEN again", 20)

            # The broker frozen: STALE (the meter dimmed, not silently frozen); thawed: live.
            assert t.broker.proc is not None
            frozen = time.monotonic()
            t.broker.proc.send_signal(signal.SIGSTOP)
            try:
                # --keepalive-s 1: unanswered pings drop the link within about 2 s (+1 s).
                page = await until(driver, TABLE, lambda p: p["stale"], "STALE", 12)
                print(f"STALE {time.monotonic() - frozen:.1f} s after the broker froze")
                assert "broker" in page["staleWhy"]
                await asyncio.to_thread(driver.save_screenshot, str(shots / "stale.png"))
            finally:
                t.broker.proc.send_signal(signal.SIGCONT)
            await until(
                driver,
                TABLE,
                lambda p: not p["stale"] and main(p) == {"amount": "$1,000.06", "state": "open"},
                "live again after the broker thawed",
                25,
            )

            # The sign server restarted: the page reconnects by itself, no reload.
            assert sign.stop() == 0
            await until(driver, TABLE, lambda p: p["stale"], "STALE without a server", 8)
            await sign.start()
            await until(
                driver,
                TABLE,
                lambda p: not p["stale"] and main(p)["amount"] == "$1,000.06",
                "the meter after the server restart",
                15,
            )
            # A browser reload: the full picture again at once.
            await asyncio.to_thread(driver.refresh)
            await until(driver, TABLE, lambda p: main(p)["amount"] == "$1,000.06", "after reload")
            # On a phone.
            await asyncio.to_thread(driver.set_window_size, 390, 844)
            await asyncio.sleep(0.3)
            await asyncio.to_thread(driver.save_screenshot, str(shots / "phone.png"))
        finally:
            await asyncio.to_thread(driver.quit)
            if sign.proc is not None:
                with contextlib.suppress(Exception):
                    sign.stop()
