"""Ledgers for the report tests: tables and a link played through the real engine, book and
ledgers, on a clock of their own (a quarter of play written in a second or two).

Each table plays bench/stress.py's random valid rounds (bets, LOCK, hands keyed, the
supervisor's confirm or reject, VOIDs, RECONCILE; a payout slip journaled with every award,
as the daemon does), then an operator's documented meter
adjustment, then a parameter change (the table reopened with another reserve rate), then
more rounds; the link plays tests/link_rig.py's exchange (contributions from two tables, a
royal flush claimed and confirmed, a void reversed, a claim rejected).
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

from bench import stress
from progressived.config.site import Shift, SiteSection
from progressived.config.slips import SlipsSection, slip_rules
from progressived.core.money import UNITS_PER_DOLLAR
from progressived.core.params import TableParams
from progressived.engine import AdjustMeter, decide
from progressived.ledger import Ledger
from progressived.ledger.slips import SlipIssuer
from tests.link_rig import Rig

ZONE = "America/New_York"
SITE = SiteSection(
    time_zone=ZONE,
    shifts=(Shift(name="day", start="06:00"), Shift(name="swing", start="14:00"),
            Shift(name="graveyard", start="22:00")),
)
# 2026-Q4 opens on 2026-10-01 at 06:00 New York time (EDT, UTC-4): 10:00 UTC.
Q4_OPENS = datetime(2026, 10, 1, 10, 0, tzinfo=UTC)
ADJUSTED = 5 * UNITS_PER_DOLLAR
LINK_CREATED = datetime(2026, 11, 23, 17, 0, tzinfo=UTC)  # tests/link_rig.py's AT


def stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def ticking(start: datetime, step: timedelta) -> Callable[[], str]:
    """A clock that moves ``step`` at each reading."""
    now = [start]

    def clock() -> str:
        now[0] += step
        return stamp(now[0])

    return clock


def play_table(folder: Path, table: str, *, rounds: int, start: datetime, step: timedelta,
               seed: int = 1) -> Path:
    """A table's ledger: rounds, an adjustment, a reserve rate change, more rounds."""
    path = folder / f"{table}.db"
    params = stress.demo_params(table)
    clock = ticking(start, step)
    ledger = Ledger.open(path, params, at=clock(), software="test", snapshot_every=40)
    _slips(ledger, params)
    try:
        stress.drive(ledger, params, rounds=rounds // 2, seed=seed, run=table, group=4,
                     clock=clock)
        at = clock()
        command = AdjustMeter(at=at, actor="op-7", meter="main", units=ADJUSTED,
                              reason="meter sign repaired, bring to the posted amount",
                              approved_by="sup-2")
        decision = decide(params, ledger.state, command)
        assert decision.accepted, decision.reason
        ledger.append(decision.events, decision.state, at=at, actor="op-7")
    finally:
        ledger.close()
    changed = _with_reserve_rate(params, Fraction(3, 100))
    ledger = Ledger.open(path, changed, at=clock(), software="test", snapshot_every=40)
    _slips(ledger, changed)
    try:
        stress.drive(ledger, changed, rounds=rounds - rounds // 2, seed=seed + 1,
                     run=f"{table}-b", group=4, clock=clock)
    finally:
        ledger.close()
    return path


def _slips(ledger: Ledger, params: TableParams) -> None:
    """A payout slip with every award, as the daemon journals them (default [slips])."""
    ledger.issue_slips(SlipIssuer(slip_rules(SlipsSection(), params.table_id), lambda: params))


def _with_reserve_rate(params: TableParams, reserve_rate: Fraction) -> TableParams:
    meters = tuple(dataclasses.replace(m, reserve_rate=reserve_rate) for m in params.meters)
    return dataclasses.replace(params, meters=meters)


def play_link(folder: Path, start: datetime) -> Path:
    """The link's ledger of tests/link_rig.py's exchange, its rows from ``start`` (after the
    rig's creation time, LINK_CREATED)."""
    assert start > LINK_CREATED
    (folder / "link-site").mkdir(exist_ok=True)
    rig = Rig(folder / "link-site", tables=2)
    rig.now_ms = int(start.timestamp() * 1000)
    try:
        rig.play()
    finally:
        rig.close()
    return rig.link_path


def untriggered(path: Path) -> sqlite3.Connection:
    """A connection of someone who dropped the ledger's append-only triggers."""
    conn = sqlite3.connect(path, isolation_level=None)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
        conn.execute(f"DROP TRIGGER {name}")
    return conn
