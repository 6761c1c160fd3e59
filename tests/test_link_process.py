"""The link controller as it runs on the floor: ``progressived init`` then ``progressived
link --config FILE`` as a process, its real ledger, a real Mosquitto with docs/link.md's ACL
and per-client passwords, and tables speaking the protocol from docs/link.md.

Bad input — not JSON, a payload naming another table, a sequence from the past with other
bytes or from the far future, a claim for a hand the meter does not pay — gets a clear
answer, a journaled refusal where the protocol says so, and changes no money. A SIGKILL
between messages loses nothing and doubles nothing.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from progressived.link.core.messages import Claim, Contribution, MeterWagers, Result
from progressived.runtime.control import request
from progressived.testing.config import render_toml
from progressived.testing.waits import until
from tests.link_harness import TableClient
from tests.link_sim import head_of
from tests.test_link_acl import PASSWORDS, LinkBroker

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)

PROGRESSIVED = [sys.executable, "-m", "progressived.cli.daemon"]
PROGRESSIVECTL = [sys.executable, "-m", "progressived.cli.ctl"]
DOLLAR = 1_000_000


def write_config(tmp: Path, port: int) -> Path:
    (tmp / "link.pw").write_text(PASSWORDS["link-a"] + "\n")
    text = render_toml(
        {
            "link": {"id": "link-a", "tables": "@TABLES@", "heartbeat_s": 0.3},
            "link.meters": [
                {"id": "pmg", "paytable": "pmg-01", "rate": 0.15, "reserve_rate": 0.02}
            ],
            "mqtt": {
                "host": "127.0.0.1",
                "port": port,
                "username": "link-a",
                "password_file": tmp / "link.pw",
            },
            "ledger": {"path": tmp / "link.db"},
            "metrics": {"port": 0},
            "control": {"socket": tmp / "link.sock"},
            "log": {"format": "json"},
        }
    )
    path = tmp / "link.toml"
    path.write_text(text.replace('"@TABLES@"', json.dumps(["t1", "t2"])))
    return path


class Link:
    def __init__(self, tmp: Path, config: Path) -> None:
        self.tmp, self.config, self.runs = tmp, config, 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.runs += 1
        log = (self.tmp / f"link-{self.runs}.log").open("wb")
        self.proc = subprocess.Popen(
            [*PROGRESSIVED, "link", "--config", str(self.config)], stdout=log, stderr=log
        )

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=20)
        self.proc = None
        return code


@pytest.fixture
async def floor(tmp_path: Path) -> AsyncIterator[tuple[Link, LinkBroker]]:
    broker = LinkBroker().start()
    try:
        config = write_config(tmp_path, broker.port)
        subprocess.run(
            [*PROGRESSIVED, "init", "--config", str(config)], check=True, capture_output=True
        )
        link = Link(tmp_path, config)
        link.start()
        try:
            yield link, broker
        finally:
            if link.proc is not None:
                assert link.stop() == 0
    finally:
        broker.stop()


def contribution(seq: int, count: int = 3, table: str = "t1") -> Contribution:
    return Contribution(
        table=table,
        seq=seq,
        id=f"{table}:{seq}",
        head=head_of(table, seq),
        at="2026-11-23T20:00:00Z",
        round=seq,
        wagers=(MeterWagers("pmg", count, count * DOLLAR),),
    )


def claim(seq: int, hand: str, table: str = "t1") -> Claim:
    return Claim(
        table=table,
        seq=seq,
        id=f"{table}:{seq}",
        head=head_of(table, seq),
        at="2026-11-23T20:00:01Z",
        claim=f"c{seq}",
        round=seq,
        seat=2,
        hand=hand,
        meter="pmg",
    )


async def result_for(t: TableClient, seq: int, status: str | None = None) -> Result:
    found: Result = await t.wait(
        "result", lambda r: r.seq == seq and (status is None or r.status == status)
    )
    return found


def ledger_rows(db: Path, kind: str) -> list[dict[str, object]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT data FROM journal WHERE kind = ? ORDER BY seq", (kind,))
        return [json.loads(data) for (data,) in rows]
    finally:
        conn.close()


def balance(db: Path, account: str) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT units FROM balances WHERE account = ?", (account,)).fetchone()
        return int(row[0]) if row else 0
    finally:
        conn.close()


def verify(db: Path) -> None:
    done = subprocess.run(
        [*PROGRESSIVECTL, "ledger", "verify", "--db", str(db)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


async def test_bad_input_is_refused_counted_and_changes_no_money(
    floor: tuple[Link, LinkBroker], tmp_path: Path
) -> None:
    link, broker = floor
    db = tmp_path / "link.db"
    async with TableClient(broker, "t1", PASSWORDS["t1"]) as t1:
        await until(lambda: bool(t1.of_type("heartbeat")), timeout=15)
        await t1.send(contribution(1))
        applied = await result_for(t1, 1)
        assert applied.status == "applied"
        meter = balance(db, "meter:pmg")
        assert meter == 1000 * DOLLAR + 3 * DOLLAR * 15 // 100
        rows_before = ledger_rows(db, "link_refused")

        await t1.send(b"{not json")
        bad = await t1.wait("result", lambda r: r.seq == 0 and r.code != "ok")
        assert bad.status == "refused" and bad.id == "none"
        await t1.send(contribution(2, table="t2"))  # t2's payload on t1's topic
        forged = await t1.wait("result", lambda r: r.code == "forged")
        assert forged.status == "refused"
        await t1.send(contribution(1, count=4))  # seq 1 again, other bytes
        conflict = await t1.wait("result", lambda r: r.code == "conflict")
        assert conflict.seq == 1
        await t1.send(contribution(900))  # the far future
        gap = await result_for(t1, 900, "resend")
        assert gap.resend_from == 2
        await t1.send(claim(2, "four-of-a-kind"))  # a tray hand: the meter does not pay it
        unknown = await t1.wait("result", lambda r: r.id == "t1:2")
        assert (unknown.status, unknown.code) == ("refused", "unknown-hand")
        await t1.send(contribution(1))  # the very message again: its stored result
        await until(lambda: sum(r == applied for r in t1.of_type("result")) == 2)

        # Counted per table and code (docs/link.md, "Fair share"), never journaled.
        answer = await asyncio.to_thread(
            request, tmp_path / "link.sock", {"action": "status"}, timeout=10
        )
        assert answer["status"]["refusals"] == {"t1": {"bad-json": 1, "conflict": 1, "forged": 1}}
    assert ledger_rows(db, "link_refused") == rows_before == []
    assert balance(db, "meter:pmg") == meter  # no money moved by any of it
    final = [row for row in ledger_rows(db, "link_applied") if row["table"] == "t1"]
    assert [row["seq"] for row in final] == [1, 2]  # the unknown hand consumed seq 2, finally
    assert link.stop() == 0
    verify(db)
    # The broker never went away: a clean stop says nothing of it (nor of replies it cut).
    said = (tmp_path / "link-1.log").read_text()
    assert '"broker connected"' in said  # the log is the one we think (not vacuous)
    for quiet in ("broker connection lost", "broker unreachable", "publish failed"):
        assert quiet not in said, quiet


async def test_a_sigkilled_link_loses_nothing_and_doubles_nothing(
    floor: tuple[Link, LinkBroker], tmp_path: Path
) -> None:
    link, broker = floor
    db = tmp_path / "link.db"
    async with TableClient(broker, "t1", PASSWORDS["t1"]) as t1:
        await until(lambda: bool(t1.of_type("heartbeat")), timeout=15)
        for seq in range(1, 41):
            await t1.send(contribution(seq))
            if seq == 20:
                link.stop(signal.SIGKILL)
                link.start()
        # The table's outbox: everything not answered is sent again, as the protocol says.
        for _ in range(3):
            await asyncio.sleep(1.5)
            answered = {r.seq for r in t1.of_type("result") if r.status == "applied"}
            for seq in range(1, 41):
                if seq not in answered:
                    await t1.send(contribution(seq))
        await until(
            lambda: (
                {r.seq for r in t1.of_type("result") if r.status == "applied"} >= set(range(1, 41))
            ),
            timeout=20,
        )
    assert link.stop() == 0
    rows = [row["seq"] for row in ledger_rows(db, "link_applied")]
    assert sorted(rows) == list(range(1, 41))  # each once
    wagers = -balance(db, "linked_wagers:pmg")
    assert wagers == 40 * 3 * DOLLAR
    verify(db)


def link_status(tmp: Path) -> dict[str, Any]:
    answer = request(tmp / "link.sock", {"action": "status"}, timeout=10)
    assert answer["ok"], answer
    found: dict[str, Any] = answer["status"]
    return found


async def test_a_link_ledger_deleted_under_the_controller_stops_it_applying_and_says_so(
    floor: tuple[Link, LinkBroker], tmp_path: Path
) -> None:
    """``rm`` of the link's SQLite ledger: within seconds ``status`` says so, nothing more
    is applied into the unlinked file and no heartbeat is sent (the tables close the linked
    progressive and keep their messages); the controller is not restarted for it."""
    link, broker = floor
    db = tmp_path / "link.db"
    async with TableClient(broker, "t1", PASSWORDS["t1"]) as t1:
        await until(lambda: bool(t1.of_type("heartbeat")), timeout=15)
        await t1.send(contribution(1))
        assert (await result_for(t1, 1)).status == "applied"
        db.unlink()
        gone = await until(
            lambda: not (s := link_status(tmp_path))["ledger"]["ok"] and s,
            "the deletion noticed",
            10,
            in_thread=True,
        )
        assert f"ledger file {db} was deleted" in gone["ledger"]["error"], gone["ledger"]
        beats = len(t1.of_type("heartbeat"))
        await t1.send(contribution(2))
        await asyncio.sleep(1.5)  # a period in which nothing may happen (5 heartbeats' time)
        assert [r for r in t1.of_type("result") if r.seq == 2] == []
        assert len(t1.of_type("heartbeat")) <= beats + 1  # at most one already on its way
        assert link.proc is not None and link.proc.poll() is None
        said = (tmp_path / "link-1.log").read_text()
        assert "link ledger file gone: nothing applied" in said
    # The rows it held were saved beside the path; put back, they start the link again.
    found = re.search(r"its rows are saved to (\S+):", gone["ledger"]["error"])
    assert found, gone["ledger"]["error"]
    rescued = Path(found[1])
    assert rescued.parent == tmp_path and rescued.name.startswith("link.db.rescued-")
    assert link.stop() == 0
    verify(rescued)
    rescued.replace(db)
    assert [row["seq"] for row in ledger_rows(db, "link_applied")] == [1]
    link.start()
    async with TableClient(broker, "t1", PASSWORDS["t1"]) as t1:
        await until(lambda: bool(t1.of_type("heartbeat")), timeout=15)
        await t1.send(contribution(2))
        assert (await result_for(t1, 2)).status == "applied"
