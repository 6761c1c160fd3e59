"""The contribution parameters are in the ledger: ``ledger_created`` records them, and a
ledger continued with other ones journals a ``parameter_changed`` before anything else."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from bench.stress import demo_params, drive
from progressived.cli.ctl import main
from progressived.ledger import Ledger
from progressived.ledger.verify import verify

AT = "2026-11-21T19:00:00.000000Z"
LATER = "2026-11-22T19:00:00.000000Z"
PARAMS = demo_params("t-par")


def rows(db: Path, after: int = 0) -> list[tuple[int, str, str, dict[str, Any]]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return [
            (int(s), str(k), str(a), json.loads(d))
            for s, k, a, d in c.execute(
                "SELECT seq, kind, actor, data FROM journal WHERE seq > ? ORDER BY seq", (after,)
            )
        ]


def test_ledger_created_records_the_contribution_parameters(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    Ledger.open(db, PARAMS, at=AT).close()
    created = rows(db)[0][3]
    assert created["meters"] == ["main"]  # the old keys stay
    assert created["paytable"] == "tcp-sd-1"
    assert created["parameters"] == {
        "paytable": "tcp-sd-1",
        "wager_units": PARAMS.wager_units,
        "policy": PARAMS.policy.value,
        "award_order": PARAMS.award_order.value,
        "seats": PARAMS.seats,
        "meters.main.seed_units": PARAMS.reset_seed("main"),
        "meters.main.rate": "3/20",
        "meters.main.reserve_rate": "1/20",
        "meters.main.limit_units": None,
        "meters.main.above_limit": "reserve",
    }


def test_continuing_with_other_parameters_journals_the_change_first(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db, PARAMS, at=AT) as ledger:
        drive(ledger, PARAMS, rounds=3, seed=1, run="a")
        head = ledger.head_seq
    Ledger.open(db, PARAMS, at=LATER).close()
    assert rows(db, head) == []  # the same parameters: nothing written
    meter = replace(PARAMS.meters[0], rate=Fraction(1, 10), limit=5_000_000_000)
    second = replace(PARAMS, meters=(meter,))
    with Ledger.open(db, second, at=LATER) as ledger:
        drive(ledger, second, rounds=1, seed=2, run="b")
    first = rows(db, head)[0]
    assert first[1:3] == ("parameter_changed", "system")
    assert first[3]["changes"] == {
        "meters.main.rate": {"old": "3/20", "new": "1/10"},
        "meters.main.limit_units": {"old": None, "new": 5_000_000_000},
    }
    assert "reason" in first[3]
    after = rows(db)[-1][0]
    Ledger.open(db, second, at=LATER).close()  # now recorded: nothing more
    assert rows(db, after) == []
    assert verify(db).ok


def legacy(db: Path) -> None:
    """Make ``db`` as a ledger from before the parameters were recorded: row 1 without
    them, and the chain rehashed from there (no snapshot yet at this length)."""
    c = sqlite3.connect(db, isolation_level=None)
    c.execute("DROP TRIGGER journal_no_update")
    c.execute("UPDATE journal SET data = json_remove(data, '$.parameters') WHERE seq = 1")
    prev = "0" * 64
    for seq, stored in c.execute(
        "SELECT seq, prev_hash || '|' || seq || '|' || at || '|' || table_id || '|' || "
        "ifnull(round, '') || '|' || seat || '|' || kind || '|' || category || '|' || "
        "actor || '|' || ifnull(idem_key, '') || '|' || data FROM journal ORDER BY seq"
    ).fetchall():
        text = prev + stored[64:]
        prev = hashlib.sha256(text.encode()).hexdigest()
        c.execute(
            "UPDATE journal SET prev_hash = ?, hash = ? WHERE seq = ?", (text[:64], prev, seq)
        )
    c.execute("UPDATE meta SET value = ? WHERE key = 'head_hash'", (prev,))
    assert c.execute("SELECT count(*) FROM snapshots").fetchone()[0] == 0
    c.close()
    assert verify(db).ok


def test_a_ledger_without_recorded_parameters_gets_them_once(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    Ledger.open(db, PARAMS, at=AT).close()
    legacy(db)
    with Ledger.open(db, PARAMS, at=LATER) as ledger:
        head = ledger.head_seq
    changed = [r for r in rows(db) if r[1] == "parameter_changed"]
    assert len(changed) == 1 and changed[0][0] == head
    assert changed[0][3]["changes"]["meters.main.rate"] == {"old": None, "new": "3/20"}


def test_simulate_ledger_with_another_rate_journals_parameter_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, script = tmp_path / "sim.db", tmp_path / "s.txt"
    script.write_text("bet 1\nlock\nreconcile\n")
    base = ["simulate", "--paytable", "tcp-sd-1", "--script", str(script), "--ledger", str(db)]
    assert main([*base, "--meter-rate", "0.15"]) == 0
    assert main([*base, "--meter-rate", "0.15"]) == 0
    assert [r[1] for r in rows(db)].count("parameter_changed") == 0
    assert main([*base, "--meter-rate", "0.10"]) == 0
    capsys.readouterr()
    journal = rows(db)
    index = next(i for i, r in enumerate(journal) if r[1] == "parameter_changed")
    assert journal[index][3]["changes"] == {"meters.main.rate": {"old": "3/20", "new": "1/10"}}
    assert journal[index + 1][1] == "start"  # before anything else of that run
