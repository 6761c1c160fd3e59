"""The board contract is driver-neutral and drivers are loaded lazily.

A board without key sequence numbers, acknowledgements or frame counters can be written
against :mod:`progressived.board.driver` alone; the daemon imports the configured driver only when
it needs it, and nothing of pyserial before the driver is created.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from progressived.board.driver import (
    BoardDriver,
    BoardEvent,
    BoardOnline,
    KeyPressed,
    SensorsReported,
)
from progressived.board.lights import Light
from progressived.config.daemon import load_daemon_config
from progressived.daemon.service import Controller
from progressived.testing.broker import Mosquitto
from progressived.testing.waits import until
from tests.daemon_harness import init_ledger, write_config


class PlainBoard:
    """A board that reports presses by their code only: no sequence numbers, no acks."""

    def __init__(self, events: list[BoardEvent]) -> None:
        self.queue: asyncio.Queue[BoardEvent] = asyncio.Queue()
        for event in events:
            self.queue.put_nowait(event)
        self.lights: list[Mapping[int, Light]] = []
        self._stop = asyncio.Event()

    async def run(self) -> None:
        await self._stop.wait()

    async def next_event(self) -> BoardEvent:
        return await self.queue.get()

    async def events(self) -> AsyncIterator[BoardEvent]:
        while True:
            yield await self.next_event()

    def key_handled(self, event: KeyPressed) -> None:
        return None  # this board has nothing to acknowledge

    async def set_lights(self, lights: Mapping[int, Light]) -> None:
        self.lights.append(dict(lights))

    async def stop(self) -> None:
        self._stop.set()

    @property
    def counters(self) -> Mapping[str, int]:
        return {}

    @property
    def online(self) -> bool:
        return True


async def test_a_board_without_key_numbers_drives_a_round(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    path = write_config(tmp_path, mosquitto, tmp_path / "no-board")
    init_ledger(path)
    config = load_daemon_config(path)
    board = PlainBoard(
        [
            BoardOnline(board_id="plain", protocol_version=1),
            SensorsReported(present=frozenset({2})),
            KeyPressed(code="LOCK"),
        ]
    )
    assert isinstance(board, BoardDriver)
    controller = Controller(config, driver=board)
    runner = asyncio.create_task(controller.run(install_signals=False))
    await until(lambda: controller.state.locked, "the round locked", 10)
    controller.request_stop()
    assert await asyncio.wait_for(runner, timeout=30) == 0
    assert sorted(controller.state.locked) == [2]
    assert board.lights, "the lights were sent to the board"
    with sqlite3.connect(config.ledger.path) as conn:
        kinds = [k for (k,) in conn.execute("SELECT kind FROM journal ORDER BY seq")]
        keys = [
            k for (k,) in conn.execute("SELECT idem_key FROM journal WHERE kind = 'round_locked'")
        ]
    assert "round_locked" in kinds
    assert keys == [None]  # no idempotency key from this board: none journaled


def test_the_serial_driver_is_imported_only_when_created(tmp_path: Path) -> None:
    script = """
import json, sys
from progressived.config.drivers import available_drivers, load_driver_factory
names = available_drivers()
before = sorted(m for m in ("progressived_drivers.plugins", "progressived_drivers.serial_board", "serial_asyncio_fast")
                if m in sys.modules)
factory = load_driver_factory("serial")
settings = factory.validate({"port": "/dev/null"})
validated = sorted(m for m in ("progressived_drivers.serial_board", "serial_asyncio_fast") if m in sys.modules)
factory.create(settings)
created = "progressived_drivers.serial_board" in sys.modules and "serial_asyncio_fast" in sys.modules
print(json.dumps([names, before, validated, created, settings.seats]))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    names, before, validated, created, seats = json.loads(out.stdout)
    assert "serial" in names
    assert before == []  # listing the drivers imports none
    assert validated == []  # validating the settings does not import pyserial
    assert created is True
    assert seats is None


def test_the_daemon_modules_never_import_a_driver() -> None:
    script = (
        "import sys, progressived.daemon.service, progressived.cli.daemon\n"
        "print(sorted(m for m in sys.modules if m == 'progressived_drivers' or m.startswith('progressived_drivers.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


def test_py_typed_markers_ship_with_both_packages() -> None:
    root = Path(__file__).resolve().parent.parent
    for package in (root / "progressived", root / "drivers" / "progressived_drivers"):
        assert (package / "py.typed").is_file()
