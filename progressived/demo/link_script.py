"""The linked demo's script: what the floor plays once the processes run.

Four acts, each announced: every table contributes; two tables hit the royal flush moments
apart (the link's log orders them: the first takes the whole meter, the second the meter
reset to seed + reserve plus what came in between); the link controller goes down (the
tables close the linked progressive; a round locked before finishes; a claim keyed during
the outage waits, PENDING) and comes back (the outboxes drain, the claim is priced, the
supervisor confirms it); then the reconciliation of every ledger with the link's.

Keypad codes are the defaults of config/keypad.example.toml: ``S<n>`` a seat, ``H<n>`` the
paytable's n-th hand (pmg-01: H1 royal flush, H2 straight flush, H6 straight).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TextIO

from progressived.demo.link import (
    DemoTable,
    Floor,
    FloorRun,
    Process,
    dollars,
    floor_processes,
    reconcile,
    watch,
)
from progressived.demo.link_console import Console, interact, on_screen
from progressived.signs.screen import Screen
from progressived.testing.broker import BrokerUnavailable

ROYAL, STRAIGHT_FLUSH, STRAIGHT = "H1", "H2", "H6"
INTERRUPTED = 130  # Ctrl-C's exit status (docs/operations.md, "Exit codes")


async def _online(floor: Floor, tables: list[DemoTable]) -> None:
    def ready() -> bool:
        for t in tables:
            if not t.daemon.alive():
                raise RuntimeError(f"{t.id}: the daemon exited; see {t.daemon.log}")
        return all(floor.of(t.id, "board_online") for t in tables)

    await floor.until(ready, "every table's board to come online", 60)
    await floor.until(lambda: bool(floor.meter), "the linked meter on its sign topic", 30)


async def _play_round(t: DemoTable, seats: list[int], keys: list[str]) -> None:
    await t.type(*(f"bet {s}" for s in seats))
    await asyncio.sleep(0.3)
    await t.type("key LOCK", *(f"unbet {s}" for s in seats))
    await t.type(*keys)


async def _reconciled(floor: Floor, t: DemoTable, count: int) -> None:
    await floor.until(lambda: len(floor.of(t.id, "round_reconciled")) >= count, f"{t.id} RECON")


async def _confirm(t: DemoTable) -> None:
    await t.type("supervisor on", "key OK", "supervisor off")


async def _seen(
    floor: Floor, t: DemoTable, kind: str, count: int = 1, timeout: float = 30
) -> None:
    await floor.until(lambda: len(floor.of(t.id, kind)) >= count, f"{t.id}: {kind}", timeout)


async def act_contributions(floor: Floor, tables: list[DemoTable]) -> None:
    floor.say("-- act 1: every table locks progressive wagers; the one meter grows")
    await asyncio.gather(
        *(_play_round(t, [1, 2, 3, 4], ["key S2", f"key {STRAIGHT}", "key RECON"]) for t in tables)
    )
    for t in tables:
        await _reconciled(floor, t, 1)


async def act_two_royals(floor: Floor, tables: list[DemoTable]) -> None:
    first, second = tables[0], tables[1]
    floor.say(
        f"-- act 2: royal flushes at {first.id} seat 3 and {second.id} seat 5, 0.2 s apart; "
        "the link's log orders them"
    )
    await asyncio.gather(*(_play_round(t, [3, 5, 6], []) for t in tables))
    await floor.until(
        lambda: all(len(floor.of(t.id, "round_locked")) >= 2 for t in tables), "the LOCKs"
    )
    await first.type("key S3", f"key {ROYAL}")
    await asyncio.sleep(0.2)
    await second.type("key S5", f"key {ROYAL}")
    for t in (first, second):
        await _seen(floor, t, "award_keyed")
    for t in (first, second):
        await _confirm(t)
        await _seen(floor, t, "award_confirmed")
    await asyncio.gather(*(t.type("key RECON") for t in tables))
    for t in tables:
        await _reconciled(floor, t, 2)


async def act_outage(floor: Floor, link: Process, tables: list[DemoTable]) -> None:
    floor.say("-- act 3: the link controller is killed (SIGKILL) with a round locked at one table")
    t = tables[-1]
    await _play_round(t, [1, 7], [])
    await floor.until(lambda: len(floor.of(t.id, "round_locked")) >= 3, f"{t.id}'s LOCK")
    link.stop(signal.SIGKILL)
    floor.say("   link controller down; the tables miss its heartbeats")
    await asyncio.sleep(3.5)
    floor.say(f"   {t.id} keys a straight flush at seat 7 during the outage: PENDING")
    await t.type("key S7", f"key {STRAIGHT_FLUSH}")
    other = tables[0]
    await other.type("bet 1")
    await asyncio.sleep(0.3)
    await other.type("key LOCK", "unbet 1")
    await asyncio.sleep(1.0)
    closed = [e for e in floor.of(other.id, "table_closed") if e.get("reason") == "link-down"]
    floor.say(
        f"   {other.id}: LOCK with the link down -> "
        + ("the linked progressive is CLOSED" if closed else "(no CLOSED event seen)")
    )
    floor.say("-- the link controller restarts: it rebuilds its book from its ledger")
    link.start()
    keyed = len(floor.of(t.id, "award_keyed"))  # before the outage (act 2)
    await _seen(floor, t, "award_keyed", keyed + 1, 60)
    await _confirm(t)
    await t.type("key RECON")
    await _reconciled(floor, t, 3)


async def play_floor(work: Path, count: int, headless: bool, out: TextIO) -> int:
    """Play the floor. Headless: the reconciliation's status. Otherwise the person at the
    terminal also gets where everything is, the web sign and the linked meter on screen,
    then the boards (:mod:`progressived.demo.link_console`) until the end of input."""
    screen = None if headless else Screen(out)
    floor = Floor(say=screen.say if screen is not None else _printer(out))
    async with floor_processes(work, count, out, metrics=not headless) as run:
        watcher = asyncio.create_task(watch(run.port, floor))
        try:
            if screen is None:
                status, report = await _script(work, floor, run)
            else:
                async with on_screen(run, work, floor, screen, out) as web:
                    status, report = await _script(work, floor, run)
                    _say_reconciliation(floor, status, report, headless=False)
                    await interact(Console(run.tables, screen.say, web), screen)
                    return status
        finally:
            watcher.cancel()
            with contextlib.suppress(BaseException):
                await watcher
    _say_reconciliation(floor, status, report, headless=True)
    return status


def _printer(out: TextIO) -> Callable[[str], None]:
    return lambda line: print(line, file=out, flush=True)


async def _script(work: Path, floor: Floor, run: FloorRun) -> tuple[int, dict[str, Any]]:
    """The four acts; the reconciliation's status and report."""
    await _online(floor, run.tables)
    floor.say(f"linked meter {dollars(floor.meter.get('units'))} on {len(run.tables)} tables")
    await act_contributions(floor, run.tables)
    await act_two_royals(floor, run.tables)
    await act_outage(floor, run.link, run.tables)
    return await _settled(work, run.tables)


def _say_reconciliation(floor: Floor, status: int, report: dict[str, Any], headless: bool) -> None:
    floor.say("-- reconciliation (progressivectl link reconcile)")
    floor.say(json.dumps(report, indent=2, sort_keys=True) if headless else _summary(report))
    floor.say("no differences" if status == 0 else f"reconcile exit status {status}")


async def stoppable(body: Coroutine[Any, Any, int]) -> int:
    """``body``'s status, unless Ctrl-C (130, docs/operations.md) or SIGTERM (0, a requested
    stop) comes first: the first such signal cancels it, so its cleanup stops every process,
    and later ones are ignored, so a second Ctrl-C cannot cut that cleanup short."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(body)
    received: list[int] = []

    def on_signal(signum: int) -> None:
        if received:
            return
        received.append(signum)
        if signum == signal.SIGINT:
            print("\nprogressived demo: interrupted: stopping", file=sys.stderr, flush=True)
        # A Ctrl-C reaches the broker too: the watcher's MQTT client then fails on a closed
        # socket while it is cancelled, which says nothing new.
        loop.set_exception_handler(lambda _loop, _context: None)
        task.cancel()

    installed = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(RuntimeError, ValueError):  # not on the main thread
            loop.add_signal_handler(signum, on_signal, signum)
            installed.append(signum)
    try:
        return await task
    except BaseException:
        if not received:
            raise
        return INTERRUPTED if received[0] == signal.SIGINT else 0
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


async def _settled(work: Path, tables: list[DemoTable]) -> tuple[int, dict[str, Any]]:
    """Reconcile once every table's outbox has drained (nothing in flight), or after 30 s."""
    status, report = reconcile(work, tables)
    for _ in range(60):
        if not report.get("in_flight"):
            break
        await asyncio.sleep(0.5)
        status, report = reconcile(work, tables)
    return status, report


def _summary(report: dict[str, Any]) -> str:
    differences = report.get("differences", [])
    lines = [f"differences: {len(differences)}"]
    lines += [f"  {d}" for d in differences[:20]]
    return "\n".join(lines)


def run_link_demo(
    *,
    tables: int,
    headless: bool,
    workdir: Path | None = None,
    keep: bool = False,
    out: TextIO = sys.stdout,
) -> int:
    """Start the floor, play the script, reconcile; headless: 0 only when the ledgers agree.
    Otherwise typing follows until the end of input or ``quit`` (the reconciliation's status)
    or Ctrl-C (130); the temporary directory is removed either way unless ``keep``."""
    keep = keep or workdir is not None
    # The watcher's MQTT client logs through "mqtt"; without a handler Python would print its
    # warnings raw (e.g. when a Ctrl-C stops the broker first).
    logging.getLogger("mqtt").addHandler(logging.NullHandler())
    work = workdir or Path(tempfile.mkdtemp(prefix="progressived-link-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"files       {work} ({'kept' if keep else 'removed at exit'})", file=out, flush=True)
    try:
        return asyncio.run(stoppable(play_floor(work, tables, headless, out)))
    except BrokerUnavailable as exc:
        print(f"progressived demo: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the signal handlers were in place
        print("\nprogressived demo: interrupted: stopping", file=sys.stderr)
        return INTERRUPTED
    except (RuntimeError, TimeoutError) as exc:  # a process that exited, a wait that timed out
        print(f"progressived demo: {exc}", file=sys.stderr)
        if not keep:
            keep = True  # its logs say why
            print(f"progressived demo: kept its files in {work}", file=sys.stderr)
        return 1
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
        if not headless:
            done = "kept" if keep else "removed" if not work.exists() else "could not remove"
            print(f"{done} the demo's files in {work}", file=out, flush=True)
