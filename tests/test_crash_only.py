"""Crash-only: a core task that fails stops the daemon with status 1 (systemd restarts it)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from progressived.board.driver import BoardEvent, KeyPressed
from progressived.board.lights import Light
from progressived.config.daemon import DaemonConfig, load_daemon_config
from progressived.daemon.service import Controller
from progressived.testing.broker import Mosquitto
from tests.daemon_harness import init_ledger, write_config


class BrokenBoard:
    """A driver whose event stream fails after start (e.g. a bug in a driver plugin)."""

    def __init__(self) -> None:
        self._stop = asyncio.Event()

    async def run(self) -> None:
        await self._stop.wait()

    async def next_event(self) -> BoardEvent:
        await asyncio.sleep(0.2)
        raise RuntimeError("driver bug")

    def key_handled(self, event: KeyPressed) -> None:
        return None

    async def set_lights(self, lights: Mapping[int, Light]) -> None:
        return None

    async def stop(self) -> None:
        self._stop.set()

    @property
    def counters(self) -> Mapping[str, int]:
        return {}

    @property
    def online(self) -> bool:
        return False


def boardless(tmp: Path, broker: Mosquitto) -> tuple[DaemonConfig, Controller]:
    """A table's configuration and ledger made in ``tmp``, and a daemon for it whose board
    driver fails once run (a daemon that is only started never reads it)."""
    path = write_config(tmp, broker, tmp / "no-board")
    init_ledger(path)
    config = load_daemon_config(path)
    return config, Controller(config, driver=BrokenBoard())


async def test_a_failed_core_task_stops_the_daemon_with_status_1(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    config, controller = boardless(tmp_path, mosquitto)
    status = await asyncio.wait_for(controller.run(install_signals=False), timeout=30)
    assert status == 1
    # It stopped cleanly: the stop is journaled, so the next start recovers as usual.
    reopened = Controller(config, driver=BrokenBoard())
    await reopened.start()
    assert reopened.ledger.head_seq > 0
    await reopened.db(reopened.ledger.close)
