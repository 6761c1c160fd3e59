"""A member table flooding the link costs the other tables nothing but their turn
(docs/link.md, "Fair share").

A real link controller and Mosquitto (tests/link_flood.py): t1's account floods its own
topic with junk and valid contributions from another process while t2 plays one
contribution at a time. t2's contributions are all answered while the flood is still
coming, its heartbeats never stop for the link-down bound (3 × ``heartbeat_s``), the
link's inbox never holds more than its lanes' bounds (the status's ``high_water``), t1's
lane drops what it cannot hold (counted), junk makes no ledger row, and the money adds up
(``ledger verify``).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from progressived.link.runtime.inbox import LANE_MAX, STRANGERS_MAX
from progressived.testing.waits import until
from tests.link_flood import (
    LINK_DOWN_S,
    GoodTable,
    flooding,
    link_status,
    rows_by_kind,
    rss_kb,
    write_config,
)
from tests.test_link_acl import LinkBroker
from tests.test_link_process import PROGRESSIVED, Link, verify

pytestmark = pytest.mark.e2e  # real processes end to end

FLOOD_S = 120.0  # the flooder's longest run: it is stopped once t2 has been answered
# messages a second: more than the link answered one by one before (t2 then waited 20 s
# and more for an answer), less than it reads on a loaded 2-core machine (beyond that
# rate the broker's queue toward the link grows, and every table waits in it: docs/link.md)
FLOOD_RATE = 3_000.0
GOOD_ROUNDS = 6  # t2's contributions during the flood, one at a time
PACE_S = 0.2
APPLIED = ("link_applied:t1", "link_applied:t2")  # between them (a dealer's pace is slower: this is the short version)


@dataclass
class FloodRun:
    """What one run of the rig saw (``status``: the link's, as t2's last answer came)."""

    flood_going_on: bool
    status: dict[str, Any]
    rows_before: dict[str, int]
    rows_after: dict[str, int]
    rss_grew_kb: int
    sent: int
    waits: list[float]


async def flood_and_play(
    tmp: Path,
    *,
    flood_s: float,
    rate: float,
    rounds: int,
    valid: int,
    pace_s: float = PACE_S,
    stop_when_answered: bool = True,
) -> FloodRun:
    """Run the rig: t2 plays ``rounds`` contributions while t1 floods; returns what the
    assertions need (asserting the invariants that hold whatever the counts). ``flood_s``
    is the flood's longest run: with ``stop_when_answered`` it ends once t2 is answered
    (a loaded machine makes t2 slower, never the flood shorter than t2's turns)."""
    broker = LinkBroker().start()
    try:
        config = write_config(tmp, broker.port)
        subprocess.run([*PROGRESSIVED, "init", "--config", str(config)], check=True)
        link = Link(tmp, config)
        link.start()
        assert link.proc is not None
        try:
            async with GoodTable(broker.port).session() as good:
                await until(lambda: good.heartbeats, "the link's first heartbeat", timeout=20)
                assert (await good.play(1)).status == "applied"
                rows_before = rows_by_kind(tmp / "link.db")
                rss_before = rss_kb(link.proc.pid)
                with flooding(broker.port, valid, flood_s, rate) as flooder:
                    assert flooder.stdout is not None
                    line = await asyncio.to_thread(flooder.stdout.readline)
                    assert line.strip() == b"connected", line
                    await until(
                        lambda: link_status(tmp)["refusals"].get("t1"),
                        "the flood reaching the link",
                        timeout=20,
                        in_thread=True,
                    )
                    since = time.time()
                    for seq in range(2, rounds + 2):
                        answer = await good.play(seq)
                        assert (answer.status, answer.seq) == ("applied", seq)
                        await asyncio.sleep(pace_s)
                    end = time.time()
                    status = await asyncio.to_thread(link_status, tmp)
                    # t2 was answered while the flood still came: the link counts more of
                    # it afterwards (judged by the link's count, however slow the machine).
                    flood_going_on = await flood_counted_after(tmp, status, flooder)
                    await until(lambda: good.heard_after(end), "a heartbeat sent after", 20)
                    gap = good.longest_gap(since, end)
                    rss_after = rss_kb(link.proc.pid)
                    if stop_when_answered:
                        flooder.terminate()  # the flood's count is still printed
                    out, err = await asyncio.to_thread(flooder.communicate)
                    assert flooder.returncode == 0, err.decode()[-2000:]
                # Answers the link owed t2 all came, in order, once each.
                applied = [r.seq for r in good.answers if r.status == "applied"]
                assert sorted(set(applied)) == list(range(1, rounds + 2))
                # The link kept its beat: by its own send times, t2 never went the link-down
                # bound without one.
                assert gap < LINK_DOWN_S, f"{gap:.1f} s without a heartbeat"
        finally:
            assert link.stop() == 0
        rows_after = rows_by_kind(tmp / "link.db")
        verify(tmp / "link.db")
        assert "Traceback" not in (tmp / "link-1.log").read_text()
        return FloodRun(
            flood_going_on=flood_going_on,
            status=status,
            rows_before=rows_before,
            rows_after=rows_after,
            rss_grew_kb=rss_after - rss_before,
            sent=int(out.split()[-1]),
            waits=good.waits,
        )
    finally:
        broker.stop()


def flood_seen(status: dict[str, Any]) -> int:
    """t1's messages the link has seen: refused (by code) or dropped from its full lane."""
    refused = sum(status["refusals"].get("t1", {}).values())
    return refused + status["inbox"]["dropped"].get("t1", 0)


async def flood_counted_after(
    tmp: Path, status: dict[str, Any], flooder: subprocess.Popen[bytes]
) -> bool:
    """Whether the link sees more of t1's flood after ``status`` was read (within 20 s,
    while the flooder runs): t2 was answered amid the flood, not after it."""
    seen = flood_seen(status)

    def more() -> bool:
        return flooder.poll() is not None or flood_seen(link_status(tmp)) > seen

    await until(more, "the link seeing more of the flood", 20, in_thread=True)
    return flood_seen(await asyncio.to_thread(link_status, tmp)) > seen


def check_the_share(found: FloodRun, rounds: int) -> None:
    """What every run of the rig must show (the short test's and the soak's)."""
    status = found.status
    # t2 was answered while the flood was still coming: it waited only for its turn.
    assert found.flood_going_on, f"the flood ended before t2 was answered: {found.waits}"
    # The inbox held at most its lanes' bounds, and t1's lane dropped the rest (counted).
    inbox = status["inbox"]
    assert inbox["high_water"] <= 2 * LANE_MAX + STRANGERS_MAX, inbox
    assert inbox["dropped"].get("t2", 0) == 0, inbox
    # Junk is counted per table and code, not journaled: only applied messages made rows.
    assert set(status["refusals"]) == {"t1"}, status["refusals"]
    before, after = found.rows_before, found.rows_after
    grown = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    assert {k for k, n in grown.items() if n} <= {"link_applied", *APPLIED}, grown
    assert grown["link_applied:t2"] == rounds
    assert grown["link_applied"] == rounds + grown.get("link_applied:t1", 0)
    # Refusal answers to t1 were held within its budget.
    assert status["answers_dropped"].get("t1", 0) > 0, status["answers_dropped"]
    # The link's memory does not grow with the flood (it grew 250 MB before lanes had a bound).
    assert found.rss_grew_kb < 60_000, f"the link's memory grew {found.rss_grew_kb} kB"


async def test_a_flooding_member_costs_the_other_table_only_its_turn(tmp_path: Path) -> None:
    found = await flood_and_play(
        tmp_path, flood_s=FLOOD_S, rate=FLOOD_RATE, rounds=GOOD_ROUNDS, valid=2_000
    )
    check_the_share(found, GOOD_ROUNDS)
