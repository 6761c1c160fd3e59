"""The shipped pair, ``config/link.toml`` and ``config/linked-table.toml``, as they are
(only the broker's port, the files' paths, the board's pty and the machine's group changed
for loopback): check-config accepts them, alone and together, and they play together — a
real Mosquitto, the link controller and the table daemon as processes, the board simulator
on a pty. The table's meter ``main`` is the link's ``pmg``: LOCK posts a contribution the
link applies to ``pmg``, the table shows it on its meter topic ``main``, a royal flush is
claimed on ``pmg`` and paid at the table on ``main``.

Broken pairs: check-config names the problem (a table meter named after the link's, a
``link_meter`` the link has not, a table the link does not list); and a table the link does
not list, run anyway, is told ``unknown-table`` at its first message and closes its linked
meter.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import os
import re
import signal
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from progressived.cli.ctl import main as ctl_main
from progressived.cli.daemon import main
from progressived.ledger.verify import verify
from progressived.runtime.control import request
from progressived.testing.board import simulator
from progressived.testing.broker import Mosquitto
from progressived.testing.rig import PROGRESSIVED, Table, init_ledger
from progressived.testing.subscriber import Subscriber
from progressived.testing.waits import until
from tests.conftest import ROOT
from tests.test_link_table_daemon import table_problems

LINK_FILE = ROOT / "config" / "link.toml"
TABLE_FILE = ROOT / "config" / "linked-table.toml"
Overrides = Mapping[tuple[str, str], object]


def overridden(text: str, values: Overrides) -> str:
    """``text`` (TOML) with the value of each ``(section, key)`` replaced; every one must be
    in the file already (the shipped files are used as they are, not rewritten)."""
    section, pending, out = "", dict(values), []
    for line in text.splitlines():
        header = re.match(r"\s*\[+\s*([A-Za-z0-9_.]+)\s*\]+", line)
        key = re.match(r"\s*([A-Za-z0-9_]+)\s*=", line)
        if header:
            section = header.group(1)
        if not header and key and (section, key.group(1)) in pending:
            out.append(f"{key.group(1)} = {json.dumps(pending.pop((section, key.group(1))))}")
        else:
            out.append(line)
    assert not pending, f"not in the shipped file: {sorted(pending)}"
    return "\n".join(out) + "\n"


def machine(tmp: Path, broker_port: int, name: str) -> dict[tuple[str, str], object]:
    """What differs on this machine: the broker's port, paths, the operators' group."""
    return {
        ("mqtt", "port"): broker_port,
        ("ledger", "path"): str(tmp / f"{name}.db"),
        ("metrics", "port"): 0,
        ("control", "socket"): str(tmp / f"{name}.sock"),
        ("control", "group"): grp.getgrgid(os.getgid()).gr_name,
    }


def write_pair(tmp: Path, broker_port: int, table: Overrides = ()) -> tuple[Path, Path]:
    link = tmp / "link.toml"
    link.write_text(overridden(LINK_FILE.read_text(), machine(tmp, broker_port, "link")))
    values = {**machine(tmp, broker_port, "table"), ("board", "port"): str(tmp / "board")}
    path = tmp / "linked-table.toml"
    path.write_text(overridden(TABLE_FILE.read_text(), {**values, **dict(table)}))
    return link, path


@contextlib.asynccontextmanager
async def floor(tmp: Path, table: Overrides = ()) -> AsyncIterator[tuple[Table, Path]]:
    """The broker, the link controller (after ``progressived init``) and the table daemon
    (after ``init``) with its board, from the shipped files; yields the table and the
    link's ledger."""
    with Mosquitto() as broker:
        link_file, table_file = write_pair(tmp, broker.port, table)
        assert main(["init", "--config", str(link_file)]) == 0
        assert main(["link", "--config", str(link_file), "--check"]) == 0
        init_ledger(table_file)
        with (tmp / "link.log").open("wb") as out:
            link = subprocess.Popen(
                [*PROGRESSIVED, "link", "--config", str(link_file)], stdout=out, stderr=out
            )
        sim = simulator(tmp / "board")
        await sim.start()
        sub = Subscriber(broker.host, broker.port, identifier="pair-sign", check=table_problems)
        await sub.start()
        t = Table(tmp, broker, sim, table_file, sub)
        try:
            t.start_daemon()
            await t.online()
            yield t, tmp / "link.db"
        finally:
            if t.proc is not None and t.proc.poll() is None:
                t.kill(signal.SIGTERM)
            link.send_signal(signal.SIGTERM)
            assert link.wait(timeout=20) == 0, (tmp / "link.log").read_text()[-3000:]
            await sub.stop()
            await sim.stop()
    assert not sub.problems, "\n".join(sub.problems[:20])


def status(t: Table) -> dict[str, Any]:
    answer = request(t.tmp / "table.sock", {"action": "status"}, timeout=10)
    assert answer["ok"], answer
    found: dict[str, Any] = answer["status"]
    return found


def link_rows(db: Path, kind: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        found = conn.execute("SELECT data FROM journal WHERE kind = ? ORDER BY seq", (kind,))
        return [json.loads(data) for (data,) in found.fetchall()]
    finally:
        conn.close()


def test_check_config_accepts_the_shipped_pair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check-config", "--file-only", str(LINK_FILE)]) == 0
    assert main(["check-config", "--file-only", str(TABLE_FILE)]) == 0
    together = ["check-config", "--file-only", str(TABLE_FILE), "--link", str(LINK_FILE)]
    assert main(together) == 0
    out = capsys.readouterr().out
    assert "linked-table.toml: ok (uth-01, paytable pmg-01)" in out
    swapped = ["check-config", "--file-only", str(LINK_FILE), "--link", str(TABLE_FILE)]
    assert main(swapped) == 2
    assert "--link checks a table's file, not a link's" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (  # the meter named after the link's: the paytable pays a percentage of "main"
            {("progressive.meters", "id"): "pmg", ("progressive.meters", "link_meter"): "pmg"},
            "pays a percentage of meter 'main', which is not configured (meters: pmg); a "
            'linked meter keeps the paytable\'s id and names the link\'s meter with '
            'link_meter: id = "main", link = "link-a", link_meter = "pmg"',
        ),
        (
            {("progressive.meters", "link_meter"): "main"},
            "progressive.meters[0].link_meter: link link-a has no meter 'main' (its meters: "
            'pmg): it would refuse every contribution (unknown-meter); link_meter = "pmg"?',
        ),
        (
            {("table", "id"): "uth-09"},
            "table.id: link link-a does not list table uth-09 in its tables (uth-01, uth-02): "
            "it would refuse every message (unknown-table)",
        ),
        (
            {("mqtt", "prefix"): "casino"},
            "mqtt.prefix: 'casino' differs from the link's 'progressive'",
        ),
    ],
)
def test_check_config_refuses_a_broken_pair_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: Overrides, message: str
) -> None:
    link, path = write_pair(tmp_path, 1883, table)
    assert main(["check-config", "--file-only", str(path), "--link", str(link)]) == 2
    err = capsys.readouterr().err
    assert f"progressived: {path}: " in err and message in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.e2e
async def test_the_shipped_pair_plays_together(tmp_path: Path) -> None:
    async with floor(tmp_path) as (t, link_db):
        assert main(["check-config", str(t.config), "--link", str(tmp_path / "link.toml")]) == 0
        await until(
            lambda: any(m["state"] == "open" for m in t.sub.meters("main")), "the link's value"
        )
        shown = t.sub.meters("main")[-1]
        assert (shown["cents"], shown["link"]["id"]) == (100_000, "link-a")  # pmg's seed
        await t.bets(1, 3)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        # 15% of two $1 wagers on pmg (config/link.toml's rate), shown on the table's "main"
        await until(lambda: t.sub.meters("main")[-1]["cents"] == 100_030, "the contribution")
        (applied,) = link_rows(link_db, "link_applied")
        assert applied["table"] == "uth-01" and applied["result"]["status"] == "applied"
        assert applied["message"]["wagers"] == [{"count": 2, "meter": "pmg", "units": 2_000_000}]
        await t.press("S3", "H1")  # a royal flush: claimed on pmg, keyed on main
        keyed = await t.sub.wait_event("award_keyed", timeout=20)
        assert (keyed["meter"], keyed["cents"]) == ("main", 100_030)
        t.sim.supervisor(True)  # the key turned: journaled before OK is pressed
        await until(lambda: link_rows(tmp_path / "table.db", "supervisor_key"), "the key")
        await t.press("OK")
        t.sim.supervisor(False)
        confirmed = await t.sub.wait_event("award_confirmed", timeout=20)
        assert (confirmed["meter"], confirmed["cents"]) == ("main", 100_030)
        claims = link_rows(link_db, "link_applied")[1:]
        assert [(c["message"]["type"], c["message"].get("meter")) for c in claims] == [
            ("claim", "pmg"),
            ("claim_confirm", None),
        ]
        shown = await asyncio.to_thread(status, t)
        assert shown["link"]["meters"]["main"]["link_meter"] == "pmg"
        assert shown["health"] == "ok" and shown["link"]["refused"] is None
        await until(lambda: status(t)["link"]["outbox"]["depth"] == 0, "all answered", in_thread=True)
    assert verify(tmp_path / "table.db", replay=True).ok
    # Both ledgers agree on every message, the contribution on pmg included.
    args = ["link", "reconcile", "--link-db", str(link_db), "--table-db", str(tmp_path / "table.db")]
    assert ctl_main([*args, "--json"]) == 0


@pytest.mark.e2e
async def test_a_table_the_link_does_not_list_is_told_and_closes_its_linked_meter(
    tmp_path: Path,
) -> None:
    stranger = {("table", "id"): "uth-09", ("mqtt", "username"): "uth-09"}
    stranger[("link", "missed_heartbeats")] = 100  # LOCK before link-down: the link answers
    async with floor(tmp_path, stranger) as (t, link_db):
        await t.bets(2)
        await t.press("LOCK")
        await t.sub.wait_event("round_locked")
        reason = "link refused: unknown-table"
        await until(lambda: reason in t.sub.meters("main")[-1]["closed"], "CLOSED, and why")
        assert t.sub.meters("main")[-1]["state"] == "closed"
        shown = await until(lambda: (s := status(t))["link"]["refused"] and s, "refused", in_thread=True)
        assert shown["link"]["refused"]["code"] == "unknown-table"
        assert "not a member of link link-a" in shown["link"]["refused"]["reason"]
        assert shown["link"]["outbox"]["depth"] == 1  # nothing consumed: the message waits
        assert link_rows(link_db, "link_applied") == []
        assert link_rows(link_db, "link_refused") == []  # counted, not journaled
