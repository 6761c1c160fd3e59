"""The board simulator: its command language, the CLI, and a whole round through the real
serial driver, the keypad interpreter and the engine with the cable pulled mid-round."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from progressived_drivers import protocol as p
from progressived_drivers.base import (
    BoardOffline,
    BoardOnline,
    KeyPressed,
    SensorsReported,
    SupervisorKey,
)
from progressived_drivers.board_link import BoardLink
from progressived_drivers.board_sim import BoardSimulator, SimCommandError
from progressived_drivers.serial_board import BoardSettings, SerialBoardDriver

from progressived.board.keypad import KeypadInterpreter, OutcomeKind
from progressived.board.lights import Light, lights
from progressived.config.keypad import KeypadMap
from progressived.config.paytables import find_paytable
from progressived.core.params import MeterParams, TableParams
from progressived.engine import Command, Sensors, TableState, decide, initial_state
from progressived.engine.state import Phase
from progressived.testing.waits import until

HB = 0.05
CTL = [sys.executable, "-m", "progressived.cli.ctl", "simulate-board"]
AT = "2026-11-21T19:00:00Z"


async def test_command_language(tmp_path: Path) -> None:
    out: list[str] = []
    sim = BoardSimulator(link=tmp_path / "b", heartbeat_interval_s=HB, on_output=out.append)
    path = await sim.start()
    try:
        assert Path(path).is_symlink()
        assert os.readlink(path) == sim.path
        for line in ("place 2", "bet 4", "remove 2", "supervisor on", "press LOCK", "key S3"):
            assert await sim.run_command(line)
        assert sim.present == {4}
        assert sim.supervisor_on
        assert [code for _, code in sim.pending] == ["LOCK", "S3"]
        assert await sim.run_command("  # a comment")
        assert await sim.run_command("sleep 0.01")
        assert await sim.run_command("noise 50")
        assert await sim.run_command("freeze")
        assert sim.frozen
        assert await sim.run_command("thaw")
        assert await sim.run_command("unplug")
        assert not Path(path).exists()
        assert await sim.run_command("replug")
        assert Path(path).is_symlink()
        assert await sim.run_command("status")
        assert any(line.startswith("board SIM-1") for line in out)
        assert not await sim.run_command("quit")
        for bad in (
            "bet",
            "bet x",
            "bet 9",
            "supervisor maybe",
            "dance",
            "key",
            "sleep -1",
            'key "A B"',
        ):
            with pytest.raises(SimCommandError):
                await sim.run_command(bad)
    finally:
        await sim.stop()
    assert not Path(path).exists()


def test_cli_simulate_board_with_a_link_and_a_script(tmp_path: Path) -> None:
    """The CLI makes the link, runs the script, then stdin, and prints the lights the
    driver sent. ``lights`` and ``quit`` come on stdin once the driver has its lights
    acknowledged, not after a fixed sleep in the script, and the driver starts once the
    CLI says the link is made: on a loaded machine the driver, retrying with backoff (2.6 s,
    then 5.1 s) until the CLI had made the link, opened it after the script's 1.5 s sleep
    had ended and the simulator had quit (no event for 10 s: TimeoutError)."""
    link = tmp_path / "board"
    script = tmp_path / "script.txt"
    script.write_text("bet 2\nkey LOCK\n")
    proc = subprocess.Popen(
        [*CTL, "--link", str(link), "--script", str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    async def drive() -> list[object]:
        drv = SerialBoardDriver(
            BoardSettings(port=str(link), heartbeat_interval_s=HB, reconnect_initial_s=0.02)
        )
        task = asyncio.create_task(drv.run())
        events: list[object] = []
        try:
            async with asyncio.timeout(20):  # the key press, whatever comes before it
                while not any(isinstance(e, KeyPressed) for e in events):
                    events.append(await drv.next_event())
            await drv.set_lights({2: Light.BET, 3: Light.CLOSED})
            await until(lambda: drv.lights_acked)
        finally:
            await drv.stop()
            await task
        return events

    assert proc.stdout is not None
    made = proc.stdout.readline()  # the CLI's first line: the link is there
    events = asyncio.run(drive())
    stdout, stderr = proc.communicate("lights\nquit\n", timeout=20)
    assert proc.returncode == 0, stderr
    assert made.startswith(f"link {link} -> /dev/pts/"), made + stderr
    assert "lights 1=idle 2=bet 3=closed 4=idle 5=idle 6=idle 7=idle" in stdout
    assert any(isinstance(e, KeyPressed) and e.code == "LOCK" for e in events)
    assert not link.exists()


def test_cli_refuses_bad_usage(tmp_path: Path) -> None:
    res = subprocess.run(
        [*CTL, "--script", str(tmp_path / "nope")], check=False, capture_output=True, text=True
    )
    assert res.returncode == 2
    assert "no such file" in res.stderr
    res = subprocess.run([*CTL, "--seats", "40"], check=False, capture_output=True, text=True)
    assert res.returncode == 2


def test_cli_reports_bad_lines_and_goes_on(tmp_path: Path) -> None:
    script = tmp_path / "s.txt"
    script.write_text("dance\nbet 1\nstatus\nquit\n")
    res = subprocess.run(
        [*CTL, "--script", str(script), "--no-stdin"],
        check=False,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert res.returncode == 0
    assert f"{script}:1: unknown command 'dance'" in res.stderr
    assert res.stdout.startswith("pty /dev/pts/")
    assert "bets [1]" in res.stdout


class Table:
    """A minimal daemon loop: board events -> keypad -> engine -> lights back to the board."""

    def __init__(self, drv: SerialBoardDriver) -> None:
        self.params = TableParams(
            table_id="t1", paytable=find_paytable("tcp-sd-1"), meters=(MeterParams(),), seats=7
        )
        self.state: TableState = initial_state(self.params, AT).state
        self.keypad = KeypadInterpreter(KeypadMap(), self.params.paytable.hand_ids, 7)
        self.drv = drv
        self.applied: list[str] = []
        self.refused: list[str] = []
        self.online = False

    def command(self, cmd: Command) -> None:
        decision = decide(self.params, self.state, cmd)
        if decision.accepted:
            self.state = decision.state
            self.applied.append(type(cmd).__name__)
        else:
            self.refused.append(decision.reason)

    async def run(self) -> None:
        while True:
            ev = await self.drv.next_event()
            if isinstance(ev, BoardOnline):
                self.online = True
            elif isinstance(ev, BoardOffline):
                self.online = False
                self.keypad.reset()
            elif isinstance(ev, SensorsReported):
                self.command(Sensors(present=ev.present, at=AT))
            elif isinstance(ev, (KeyPressed, SupervisorKey)):
                out = self.keypad.feed(ev, AT)
                if out.kind is OutcomeKind.COMMAND and out.command is not None:
                    self.command(out.command)
                elif out.kind is OutcomeKind.REFUSED:
                    self.refused.append(out.display)
                if isinstance(ev, KeyPressed) and out.kind is not OutcomeKind.PENDING:
                    self.drv.key_handled(ev)  # the sequence is done: let the board forget it
            await self.drv.set_lights(lights(self.state, 7))


async def test_a_round_survives_unplug_and_replug(tmp_path: Path) -> None:
    link = tmp_path / "usb-board"
    sim = BoardSimulator(link=link, heartbeat_interval_s=HB)
    await sim.start()
    drv = SerialBoardDriver(
        BoardSettings(
            port=str(link), heartbeat_interval_s=HB, missed_heartbeats=6, seats=7
        ).model_copy(update={"reconnect_initial_s": 0.02, "reconnect_max_s": 0.1})
    )
    table = Table(drv)
    tasks = [asyncio.create_task(drv.run()), asyncio.create_task(table.run())]
    try:
        await until(lambda: table.online)
        sim.place_bet(1)
        sim.place_bet(3)
        await until(lambda: table.state.sensed == {1, 3})
        await until(lambda: sim.lights[1] is Light.BET and sim.lights[3] is Light.BET)
        sim.press("LOCK")
        await until(lambda: table.state.phase is Phase.LOCKED)
        sim.remove_bet(1)  # the dealer picks up the locked wagers
        sim.remove_bet(3)
        await until(lambda: sim.lights[3] is Light.LOCKED and not sim.pending)
        # the cable comes out mid-round; the dealer keys seat 3's straight meanwhile
        sim.unplug()
        await until(lambda: not table.online)
        sim.press("S3")
        sim.press("H5")
        await asyncio.sleep(0.2)
        assert table.state.keyed == ()
        sim.replug()
        await until(lambda: table.online)
        await until(lambda: len(table.state.keyed) == 1)
        assert [(k.seat, k.hand) for k in table.state.keyed] == [(3, "straight")]
        await until(lambda: sim.lights[3] is Light.WINNER and sim.lights[1] is Light.LOCKED)
        assert table.state.locked == {1, 3}  # nothing lost
        sim.press("RECON")
        await until(lambda: table.state.phase is Phase.OPEN)
        assert table.applied.count("Lock") == 1
        assert table.applied.count("KeyHand") == 1
        assert table.applied.count("Reconcile") == 1
        assert table.refused == []
        assert drv.counters["reconnects"] == 1
    finally:
        await drv.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await sim.stop()


def test_cli_sigterm_removes_the_link(tmp_path: Path) -> None:
    link = tmp_path / "board"
    proc = subprocess.Popen(
        [*CTL, "--link", str(link), "--no-stdin"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith(f"link {link} -> /dev/pts/")
    assert link.is_symlink()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert not link.exists()


async def test_board_shows_closed_when_the_controller_goes_silent(tmp_path: Path) -> None:
    out: list[str] = []
    sim = BoardSimulator(link=tmp_path / "b", heartbeat_interval_s=HB, on_output=out.append)
    await sim.start()
    drv = SerialBoardDriver(BoardSettings(port=str(tmp_path / "b"), heartbeat_interval_s=HB))
    task = asyncio.create_task(drv.run())
    try:
        await until(lambda: drv.online)
        await drv.set_lights({1: Light.BET})
        await until(lambda: sim.lights[1] is Light.BET)
        await asyncio.sleep(6 * HB)  # controller heartbeats keep the lights as they are
        assert sim.lights[1] is Light.BET
    finally:
        await drv.stop()
        await task
    await until(lambda: set(sim.lights.values()) == {Light.CLOSED}, timeout=3)
    assert out[-1].endswith("(controller silent)")
    await sim.stop()


async def test_the_fail_safe_ends_with_a_lights_not_with_a_heartbeat(tmp_path: Path) -> None:
    """docs/protocol.md, "Leaving the fail-safe": closed until the next accepted LIGHTS."""
    sim = BoardSimulator(link=tmp_path / "b", heartbeat_interval_s=HB)
    link = BoardLink(await sim.start())
    await link.open()
    try:
        link.send(p.ControllerHello(round(HB * 1000)))
        lights = p.Lights((p.LightCode.BET, p.LightCode.LOCKED))
        seq = link.send(lights)
        assert await link.ack_of(seq, 1.0, 0)
        assert sim.lights[2] is Light.LOCKED
        await until(lambda: set(sim.lights.values()) == {Light.CLOSED})  # silent: fail-safe
        link.send(p.ControllerHeartbeat())
        link.send(p.KeyAck(0))
        await asyncio.sleep(4 * HB)
        assert set(sim.lights.values()) == {Light.CLOSED}
        link.send(lights)
        await until(lambda: sim.lights[2] is Light.LOCKED)
    finally:
        await link.close()
        await sim.stop()


async def test_periodic_state_counts_heartbeats_since_the_last_state(tmp_path: Path) -> None:
    """docs/protocol.md, STATE: after every 5th HEARTBEAT since the last STATE of any kind."""
    sim = BoardSimulator(link=tmp_path / "b", heartbeat_interval_s=HB)
    link = BoardLink(await sim.start())
    await link.open()
    try:
        await asyncio.sleep(7 * HB)
        sim.place_bet(3)  # a STATE on a change restarts the count

        def states() -> list[int]:
            # The STATEs with seat 3, the change's first, found by their content: a periodic
            # STATE sent just before the bet may still be on its way to the link when the
            # bet is placed, so counting from a mark taken then could take it for the change.
            return [
                i
                for i, r in enumerate(link.received)
                if isinstance(r.msg, p.State) and 3 in r.msg.present
            ]

        await until(lambda: len(states()) >= 2)
        change, periodic = states()[:2]
        assert link.received[change].msg == p.State(7, frozenset({3}), False)
        assert link.received[periodic].msg == p.State(7, frozenset({3}), False)
        between = link.received[change + 1 : periodic]
        beats = [r for r in between if isinstance(r.msg, p.Heartbeat)]
        assert len(beats) == 5  # not at its 10th beat since boot: 5 since the last STATE
    finally:
        await link.close()
        await sim.stop()
