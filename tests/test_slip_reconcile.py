"""The accountant's reconciliation: serials accounted for, one live slip per award, amounts
per meter; and the listing commands."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from bench.stress import demo_params, drive
from progressived.cli.ctl import main
from progressived.core.params import TableParams
from progressived.ledger import Ledger
from progressived.ledger.slip_reads import slips
from progressived.ledger.slip_reconcile import reconcile
from progressived.ledger.slips import SlipIssuer
from tests.helpers import table
from tests.test_slips import AT, hit_round, play, rules


@pytest.fixture
def params() -> TableParams:
    return table("tcp-sd-1")


def two_rounds(db: Path, params: TableParams, *, slips_in_second: bool = True) -> None:
    with Ledger.open(db, params, at=AT) as ledger:
        ledger.issue_slips(SlipIssuer(rules(), lambda: params))
        play(ledger, params, *hit_round(params))
        if not slips_in_second:
            ledger.issue_slips(None)
        play(ledger, params, *hit_round(params))


def test_a_sound_ledger_reconciles(
    tmp_path: Path, params: TableParams, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "ledger.db"
    two_rounds(db, params)
    with Ledger.open(db, params, at=AT) as ledger:
        ledger.issue_slips(SlipIssuer(rules(), lambda: params))
        ledger.void_slip("T1-000003", reason="jam", by="sup-2", at=AT, reissue=True)
    report = reconcile(db)
    assert report.ok, report.differences
    assert (report.issued, report.voided, report.reissued) == (13, 1, 1)
    assert report.per_meter == {"main": {"slips_units": 2_000_000_000, "paid_units": 2_000_000_000}}
    assert main(["slips", "reconcile", "--db", str(db)]) == 0
    assert "reconciled: every serial accounted for" in capsys.readouterr().out


def test_each_difference_is_named(
    tmp_path: Path, params: TableParams, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "ledger.db"
    two_rounds(db, params, slips_in_second=False)  # round 2's awards: no slip
    with Ledger.open(db, params, at=AT) as ledger:
        ledger.issue_slips(SlipIssuer(rules(), lambda: params))
        ledger.void_slip("T1-000002", reason="spoiled", by="sup-2", at=AT)  # not reissued
    report = reconcile(db)
    assert not report.ok
    text = "\n".join(report.differences)
    assert "award 2:3:akq-spades ($1,000.00) has no live slip" in text
    assert "award 1:5:akq-suited ($500.00) has no live slip" in text  # voided, not reissued
    assert "meter main: live slips $1,000.00, but the meter paid $2,000.00 for hits" in text
    assert main(["slips", "reconcile", "--db", str(db), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and out["differences"] == report.differences
    # a period that holds only round 1... all of it on one day here: --from after it is empty
    assert reconcile(db, since="2026-11-22").ok


def test_a_gap_in_the_series_is_named(tmp_path: Path, params: TableParams) -> None:
    db = tmp_path / "ledger.db"
    two_rounds(db, params)
    conn = sqlite3.connect(db)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute(
        "DELETE FROM journal WHERE kind = 'slip_issued' AND json_extract(data, '$.number') = 4"
    )
    conn.commit()
    conn.close()
    text = "\n".join(reconcile(db).differences)
    assert "numbers missing from the series: 4" in text
    assert "has no live slip" in text


def test_listing_as_text_json_and_csv(
    tmp_path: Path, params: TableParams, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "ledger.db"
    two_rounds(db, params)
    assert main(["slips", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        len(lines) == 12 and lines[0].startswith("T1-000001  ") and "$1,000.00 taxable" in lines[0]
    )
    assert main(["slip", "list", "--db", str(db), "--json", "--to", "2026-11-21"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [s["number"] for s in listed] == list(range(1, 13))
    assert listed[0]["status"] == "live" and listed[0]["void"] is None
    assert main(["slips", "--db", str(db), "--csv", "--from", "2026-11-22"]) == 0
    assert capsys.readouterr().out.startswith("serial,status,at,")
    assert main(["slip", "show", "T1-000001", "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "ORIGINAL" in shown and "Verifier" not in shown and "ledger row" in shown
    assert main(["slip", "show", "T1-000099", "--db", str(db)]) == 1
    assert main(["slips", "--db", str(tmp_path / "missing.db")]) == 2
    assert main(["slips"]) == 2


@pytest.mark.parametrize("group", [1, 8])
def test_random_rounds_give_slips_that_sum_to_the_paid_awards(tmp_path: Path, group: int) -> None:
    """Rounds the stress driver plays (hits, rejections, voids; with ``group`` 8 several
    commands per transaction): the slips reconcile, and their total is what was paid."""
    params = demo_params("t-1")
    db = tmp_path / "ledger.db"
    with Ledger.open(db, params, at=AT) as ledger:
        ledger.issue_slips(SlipIssuer(rules(), lambda: params))
        drive(ledger, params, rounds=60, seed=30 + group, run="r", group=group)
        paid = sum(
            units
            for account, units in ledger.balances.items()
            if account.startswith("paid_attendant:") or account in ("paid_tray", "paid_envy")
        )
    report = reconcile(db)
    assert report.ok, report.differences
    live = [s for s in slips(db) if s.void is None]
    assert report.awards == len(live) > 10
    assert sum(s.slip.units for s in live) == paid


def test_simulated_rounds_journal_slips_that_reconcile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``simulate --ledger`` journals as the daemon does: a slip per paid award, reconciled,
    their total the amounts the simulation paid."""
    script = tmp_path / "rounds.txt"
    round_ = "bet 1\nbet 3\nbet 5\nlock\nkey 5 straight\nkey 3 akq-spades\nconfirm\nreconcile\n"
    script.write_text(round_ * 3 + "bet 2\nlock\nkey 2 akq-suited\nreconcile\n")
    db = tmp_path / "sim.db"
    base = ["simulate", "--paytable", "tcp-sd-1", "--meter-rate", "0.15"]
    assert main([*base, "--script", str(script), "--ledger", str(db), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    paid = sum(p["cents"] for r in report["rounds"] for p in r["pays"])
    assert main(["slips", "reconcile", "--db", str(db)]) == 0
    live = [s for s in slips(db) if s.void is None]
    assert len(live) == 3 * 4 + 1
    assert sum(s.slip.units for s in live) == paid * 10_000
