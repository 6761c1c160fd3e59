"""The systemd watchdog is pinged only while healthy: board link, ledger and event loop.

The real Controller runs in the test's loop with the board simulator on a pty and a real
Mosquitto; systemd's notify socket is a unix datagram socket the test owns.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path

import pytest

from progressived.config.daemon import load_daemon_config
from progressived.daemon.service import Controller
from progressived.runtime.systemd import Notifier
from tests.daemon_harness import table

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)


class NotifySocket:
    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.messages: list[str] = []

    def drain(self) -> list[str]:
        while True:
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except BlockingIOError:
                return self.messages

    def pings_since(self, mark: int) -> int:
        return sum("WATCHDOG=1" in m for m in self.drain()[mark:])


async def test_watchdog_stops_when_the_board_or_the_ledger_fails(tmp_path: Path) -> None:
    notify = NotifySocket(tmp_path / "notify.sock")
    async with table(tmp_path) as t:
        text = t.config.read_text() + "\n[watchdog]\nboard_offline_grace_s = 0.5\n"
        t.config.write_text(text)
        config = load_daemon_config(t.config)
        notifier = Notifier(
            {"NOTIFY_SOCKET": str(tmp_path / "notify.sock"), "WATCHDOG_USEC": "400000"}
        )
        controller = Controller(config, notifier=notifier)
        runner = asyncio.create_task(controller.run(install_signals=False))
        try:
            await t.online()
            await asyncio.sleep(0.6)
            assert any("READY=1" in m for m in notify.drain())
            mark = len(notify.drain())
            await asyncio.sleep(0.6)
            assert notify.pings_since(mark) >= 2, "healthy: pinged"

            # The board link fails: after the grace, no more pings, and systemd is told why.
            t.sim.unplug()
            await t.sub.wait_event("board_offline", timeout=10)
            await asyncio.sleep(1.0)
            mark = len(notify.drain())
            await asyncio.sleep(0.8)
            assert notify.pings_since(mark) == 0, "board offline: not pinged"
            assert any("STATUS=unhealthy: board offline" in m for m in notify.drain())
            t.sim.replug()
            await t.online(2)
            await asyncio.sleep(0.5)
            mark = len(notify.drain())
            await asyncio.sleep(0.6)
            assert notify.pings_since(mark) >= 2, "board back: pinged again"

            # The ledger fails (the disk is full): no pings, LOCK refused, nothing lost.
            head, head_hash = controller.ledger.head_seq, controller.ledger.head_hash
            pages = await controller.db(
                lambda: controller.ledger._conn.execute("PRAGMA page_count").fetchone()[0]
            )
            await controller.db(
                lambda: controller.ledger._conn.execute(f"PRAGMA max_page_count = {pages}")
            )
            # Bets placed and lifted until a write no longer fits (how many fit in the
            # last pages' free room depends on the rows written so far).
            for toggle in range(400):
                seat = toggle % 7 + 1
                if toggle // 7 % 2 == 0:
                    t.sim.place_bet(seat)
                else:
                    t.sim.remove_bet(seat)
                await asyncio.sleep(0.05)
                if not controller.health.ledger_ok:
                    break
            for _ in range(50):
                if not controller.health.ledger_ok:
                    break
                await asyncio.sleep(0.1)
            assert not controller.health.ledger_ok
            await asyncio.sleep(0.3)
            mark = len(notify.drain())
            await asyncio.sleep(0.8)
            assert notify.pings_since(mark) == 0, "ledger unavailable: not pinged"
            assert any("STATUS=unhealthy: ledger unavailable" in m for m in notify.drain())
            from progressived.daemon.port import CommandRefused, RefusalCode
            from progressived.engine import Lock

            refused = await controller.submit(Lock())
            assert isinstance(refused, CommandRefused)
            assert refused.code is RefusalCode.LEDGER_UNAVAILABLE
            # Space returns: the ledger recovers and the pings resume; nothing committed lost.
            await controller.db(
                lambda: controller.ledger._conn.execute("PRAGMA max_page_count = 1073741823")
            )
            for _ in range(50):
                if controller.health.ledger_ok:
                    break
                await asyncio.sleep(0.1)
            assert controller.health.ledger_ok
            # Nothing committed before the disk filled was lost or changed, and the refused
            # LOCK left no row: what the file holds after row `head` are bet sensors only.
            kept, locked = await controller.db(
                lambda: (
                    controller.ledger._conn.execute(
                        "SELECT hash FROM journal WHERE seq = ?", (head,)
                    ).fetchone()[0],
                    controller.ledger._conn.execute(
                        "SELECT count(*) FROM journal WHERE seq > ? AND kind = 'round_locked'",
                        (head,),
                    ).fetchone()[0],
                )
            )
            assert (kept, locked) == (head_hash, 0)
            mark = len(notify.drain())
            await asyncio.sleep(0.6)
            assert notify.pings_since(mark) >= 1
        finally:
            controller.request_stop()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(runner, 15)
    assert any("STOPPING=1" in m for m in notify.drain())
