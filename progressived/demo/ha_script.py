"""``progressived demo --tables N --ha``'s script: the acts played on the HA floor.

Act 1, every table contributes. Then three faults, each struck while a round is in flight
(every table has LOCKed; its contribution may be on its way): the primary database SIGKILLed,
the active link controller SIGKILLed, the tables' broker SIGKILLed. After each, the tables
play on, a round at a time, until the linked meter is higher than it was at the fault: the
meter keeps going. Then the reconciliation of every ledger with the link's, once nothing is
in flight. The killed database node and controller are started again (they rejoin as a
replica and a standby); the killed broker is not (the tables stay on the other).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from progressived.demo.ha import SIGN, ha_tables, missing_packages, watch_broker
from progressived.demo.link import METER, DemoTable, Floor, dollars
from progressived.demo.link_script import (
    INTERRUPTED,
    _online,
    _play_round,
    _reconciled,
    act_contributions,
    stoppable,
)
from progressived.testing.ha.cluster import ClusterTimeout
from progressived.testing.ha.link import HaLink, ha_link

MISSING = 8  # docs/operations.md, "Exit codes": this installation cannot do it
LEASE_S = 5.0  # short, so the standby's takeover is quick to watch (docs/ha.md)
FAULT_BOUND_S = 120.0


def _units(floor: Floor) -> int:
    units = floor.meter.get("units")
    return units if isinstance(units, int) else 0


def _more(floor: Floor, table: str, kind: str, than: int) -> bool:
    return len(floor.of(table, kind)) > than


def _open(floor: Floor, t: DemoTable) -> bool:
    """The table's progressive is open (its last CLOSED was followed by an open again)."""
    marks = [
        e for e in floor.events.get(t.id, []) if e.get("kind") in ("table_closed", "table_opened")
    ]
    return not marks or marks[-1].get("kind") == "table_opened"


async def _locked_round(floor: Floor, t: DemoTable, seats: list[int], keys: list[str]) -> None:
    """Bets and LOCK, then ``keys``, as a dealer plays while the link comes and goes: a table
    whose progressive is CLOSED refuses LOCK (by design: docs/link.md), so the dealer waits
    until it is open, and plays the round again if it closed between the bets and the LOCK."""
    while True:
        await floor.until(lambda: _open(floor, t), f"{t.id}'s progressive to open", FAULT_BOUND_S)
        locked = len(floor.of(t.id, "round_locked"))
        closures = len(floor.of(t.id, "table_closed"))
        await _play_round(t, seats, [])
        try:
            await floor.until(partial(_more, floor, t.id, "round_locked", locked), "LOCK", 15)
        except TimeoutError:
            if len(floor.of(t.id, "table_closed")) == closures:
                raise
            floor.say(f"{t.id:<7} LOCK refused: the linked progressive closed; the dealer waits")
            continue
        await t.type(*keys)
        return


async def _round(floor: Floor, tables: list[DemoTable]) -> None:
    """One round at every table: bets, LOCK, RECON; waited for."""
    done = {t.id: len(floor.of(t.id, "round_reconciled")) for t in tables}
    await asyncio.gather(*(_locked_round(floor, t, [1, 2, 4], ["key RECON"]) for t in tables))
    for t in tables:
        await _reconciled(floor, t, done[t.id] + 1)


async def act_fault(
    floor: Floor, tables: list[DemoTable], title: str, strike: Callable[[], tuple[str, float]]
) -> float:
    """Strike mid-round, then play until the meter moves past its value at the fault;
    the seconds from the fault until it did."""
    floor.say(f"-- {title}")
    done = {t.id: len(floor.of(t.id, "round_reconciled")) for t in tables}
    await asyncio.gather(*(_locked_round(floor, t, [3, 5], []) for t in tables))  # in flight
    said, struck = await asyncio.to_thread(strike)
    at_fault = _units(floor)  # what the signs showed once the fault had struck
    floor.say(f"   {said}")
    await asyncio.gather(*(t.type("key RECON") for t in tables))
    for t in tables:
        await _reconciled(floor, t, done[t.id] + 1)
    deadline = struck + FAULT_BOUND_S
    while _units(floor) <= at_fault:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the linked meter did not move for {FAULT_BOUND_S:g} s")
        await _round(floor, tables)
    took = time.monotonic() - struck
    floor.say(f"   the meter keeps going: {dollars(_units(floor))}, {took:.1f} s after the fault")
    return took


def kill_primary(link: HaLink) -> tuple[str, float]:
    """The fault, said, and when it struck (the monotonic clock)."""
    db = link.db
    old = db.wait_healthy()
    standby = db.sync_standby()
    at = time.monotonic()
    db.kill(old)
    db.restart(old)  # it rejoins as a replica (pg_rewind) while the floor plays on
    named = standby.name if standby is not None else "?"
    return f"database primary {old.name} SIGKILLed; Patroni promotes {named} (sync standby)", at


def kill_controller(link: HaLink) -> tuple[str, float]:
    active = link.wait_active()
    at = time.monotonic()
    active.kill()
    other = link.other(active)
    link.wait_active(not_=active)
    active.start()  # back as the standby
    return f"link controller {active.holder} SIGKILLed; {other.holder} took the lease", at


def kill_broker(link: HaLink) -> tuple[str, float]:
    broker = link.brokers[0]  # every table's first
    at = time.monotonic()
    link.kill_broker(broker)
    return f"broker {broker.address} SIGKILLed; the tables move to {link.brokers[1].address}", at


async def play_ha(link: HaLink, work: Path, count: int, out: TextIO) -> int:
    floor = Floor(say=lambda line: print(line, file=out, flush=True))
    async with ha_tables(work, link, count, out) as tables:
        watchers = [
            asyncio.create_task(watch_broker(b, link.passwords[SIGN], floor)) for b in link.brokers
        ]
        try:
            await _online(floor, tables)
            floor.say(f"linked meter {dollars(_units(floor))} on {len(tables)} tables, "
                      f"two brokers, two link controllers, three database nodes")  # fmt: skip
            await act_contributions(floor, tables)
            await act_fault(floor, tables, "act 2: the primary database is killed mid-round",
                            lambda: kill_primary(link))  # fmt: skip
            await act_fault(floor, tables, "act 3: the active link controller is killed mid-round",
                            lambda: kill_controller(link))  # fmt: skip
            await act_fault(floor, tables, "act 4: the tables' broker is killed mid-round",
                            lambda: kill_broker(link))  # fmt: skip
            status, report = await _settled(link, tables)
        finally:
            for w in watchers:
                w.cancel()
                with contextlib.suppress(BaseException):
                    await w
    floor.say("-- reconciliation (progressivectl link reconcile, the link's ledger read from the "
              "new primary)")  # fmt: skip
    floor.say(json.dumps(report, indent=2, sort_keys=True))
    floor.say("no differences" if status == 0 else f"reconcile exit status {status}")
    return status


async def _settled(link: HaLink, tables: list[DemoTable]) -> tuple[int, dict[str, Any]]:
    dbs = [t.work / "ledger.db" for t in tables]
    status, report = await asyncio.to_thread(link.reconcile, dbs)
    for _ in range(60):
        if not report.get("in_flight") and "error" not in report:
            break
        await asyncio.sleep(0.5)
        status, report = await asyncio.to_thread(link.reconcile, dbs)
    return status, report


def run_ha_demo(
    *, tables: int, headless: bool, workdir: Path | None = None, keep: bool = False,
    out: TextIO = sys.stdout,
) -> int:  # fmt: skip
    """The HA floor, its faults, the reconciliation: its status (0 only with no difference);
    8 when a Debian package it needs is missing; 1 when a process failed or a wait timed out;
    130 on Ctrl-C. Without ``headless`` the floor stays up until Enter or end of input."""
    missing = missing_packages()
    if missing:
        print(
            "progressived demo --ha: needs PostgreSQL 15, Patroni, etcd and Mosquitto: "
            f"sudo apt-get install {' '.join(missing)}",
            file=sys.stderr,
        )
        return MISSING
    keep = keep or workdir is not None
    logging.getLogger("mqtt").addHandler(logging.NullHandler())
    work = workdir or Path(tempfile.mkdtemp(prefix="progressived-ha-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"files       {work} ({'kept' if keep else 'removed at exit'})", file=out, flush=True)
    print("starting    3 etcd, 3 Patroni/PostgreSQL, 2 brokers, 2 link controllers ...",
          file=out, flush=True)  # fmt: skip
    try:
        with ha_link([f"pmg-{i:02d}" for i in range(1, tables + 1)], meter=METER,
                     lease_s=LEASE_S) as link:  # fmt: skip
            _where(link, out)
            status = asyncio.run(stoppable(play_ha(link, work, tables, out)))
            if not headless and status != INTERRUPTED:
                print("press Enter (or Ctrl-D) to stop everything", file=out, flush=True)
                with contextlib.suppress(EOFError, KeyboardInterrupt):
                    input()
            return status
    except KeyboardInterrupt:
        print("\nprogressived demo: interrupted: stopping", file=sys.stderr)
        return INTERRUPTED
    except (RuntimeError, TimeoutError, ClusterTimeout) as exc:
        print(f"progressived demo: {str(exc).splitlines()[0]}", file=sys.stderr)
        keep = True
        print(f"progressived demo: kept its files in {work}", file=sys.stderr)
        return 1
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def _where(link: HaLink, out: TextIO) -> None:
    lines = [f"database    {link.url}"]
    lines += [f"  {n.name}       Patroni REST 127.0.0.1:{n.rest_port}" for n in link.db.nodes]
    lines += [f"broker      mqtt://{b.address}  (ACL and passwords)" for b in link.brokers]
    for c in link.controllers:
        lines.append(f"link        {c.holder}: progressived link --config {c.config}")
    print("\n".join(lines), file=out, flush=True)
