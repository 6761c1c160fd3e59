"""``progressivectl report liability`` on real ledgers written by the real engine and ledgers.

Two tables (tests/report_data.py: bench/stress.py's random rounds, an operator's adjustment,
a reserve rate change) and a link (tests/link_rig.py: contributions, a royal flush claimed
and confirmed, a void reversed, a claim rejected), over 2026-Q4 in New York time. The report
must reconcile every meter to the unit; its days must chain (each day's closing the next
day's opening, read through recovery snapshots); its awards must be the ledgers' own hits;
and a ledger altered by hand must never give a clean sheet.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from progressived.cli.ctl import main
from progressived.ledger import reports
from progressived.report import liability, period, source, tables
from progressived.report.liability import Report
from progressived.report.period import Period
from tests import report_data as rd
from tests.link_rig import rehash_from

CREATED = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("report")
    step = timedelta(minutes=7)
    return {
        "tcp-01": rd.play_table(folder, "tcp-01", rounds=90, seed=3, step=step,
                                start=rd.Q4_OPENS + timedelta(hours=2)),
        "tcp-02": rd.play_table(folder, "tcp-02", rounds=70, seed=5, step=step,
                                start=rd.Q4_OPENS + timedelta(days=40)),
        "link": rd.play_link(folder, rd.LINK_CREATED + timedelta(days=1)),
    }


def make(paths: list[Path], when: Period) -> Report:
    read = [source.read(p, str(p), when, liability.bucket_of(when)) for p in paths]
    return liability.build(read, when, created_at=CREATED)


def test_a_quarter_reconciles_per_meter_table_and_in_total(ledgers: dict[str, Path]) -> None:
    q4 = period.quarter(rd.SITE, "2026-Q4")
    report = make(list(ledgers.values()), q4)
    assert report.ok, [(m.source, m.meter, m.variance) for m in report.meters]
    assert {(m.source, m.meter) for m in report.meters} == {
        ("tcp-01", "main"), ("tcp-02", "main"), ("link-a", "pmg")}
    for m in report.meters:
        assert m.variance == 0 and m.unexplained == 0
        assert m.opening.total == 0  # every ledger began inside the quarter
    # the closing liability is what `progressivectl meters` reads at the head
    for name in ("tcp-01", "tcp-02"):
        figures = reports.meters(ledgers[name])["meters"]["main"]
        (line,) = [m for m in report.meters if m.source == name]
        assert (line.closing.meter, line.closing.reserve) == (
            figures["units"], figures["reserve_units"])
        assert line.adjustments == rd.ADJUSTED
        # the awards listed are the ledger's own hits, to the unit
        hits = reports.hits(ledgers[name], last=1000)
        assert sorted((a.seq, a.units, a.hand) for a in report.awards if a.source == name) == \
            sorted((h["seq"], h["units"], h["hand"]) for h in hits)
        assert line.paid == sum(h["units"] for h in hits)
        # each with the serial of the payout slip journaled with it (docs/slips.md)
        slips = [a.slip for a in report.awards if a.source == name]
        assert slips and all(s and s.startswith(f"{name}-") for s in slips)
        assert len(set(slips)) == len(slips)
    (link,) = [m for m in report.meters if m.kind == "link"]
    assert [(a.table, a.hand) for a in report.awards if a.source == "link-a"] == [
        ("t2", "royal-flush")]
    assert link.seeds == 2 * 1000 * 1_000_000  # opened, then reset after the royal flush
    # the link's contributions by member table add up to its meter's
    assert {table for _, _, table, _, _ in report.members} == {"t1", "t2"}
    assert sum(c for *_, c in report.members) == link.contributions
    assert sum(w for *_, w, _ in report.members) == 10 * 1_000_000  # 15 wagers, 5 voided
    rows = dict(tables.tables(report))
    assert rows["liability"][-1]["level"] == "total"
    assert rows["liability"][-1]["variance_units"] == 0
    assert [c["key"] for c in rows["parameter_changes"]] == [
        "meters.main.reserve_rate", "meters.main.reserve_rate"]
    adjustments = rows["adjustments"]
    assert {(a["operator"], a["approved_by"], a["amount_units"]) for a in adjustments} == {
        ("op-7", "sup-2", rd.ADJUSTED)}
    assert all(a["time"].endswith(("EDT", "EST")) for a in adjustments)
    # expected contribution from the PAR sheet's rates: 20% of each $1 wager at the start
    par = {r["source"]: r for r in rows["par"]}
    assert par["tcp-01"]["expected_contribution_units"] == par["tcp-01"]["wagers"] * 200_000


def test_consecutive_days_chain_and_add_up_to_their_span(ledgers: dict[str, Path]) -> None:
    """Each gaming day's closing is the next one's opening (read at non-head rows through
    the latest snapshot and the postings after it), and the days' flows sum to the span's."""
    path = ledgers["tcp-01"]
    days = [period.gaming_day(rd.SITE, f"2026-10-0{d}") for d in (1, 2, 3, 4, 5)]
    reports_ = [make([path], day) for day in days]
    assert all(r.ok for r in reports_)
    lines = [r.meters[0] for r in reports_]
    assert any(line.opening.total for line in lines[1:])  # not trivially zero
    for before, after in itertools.pairwise(lines):
        assert before.closing == after.opening
    span = make([path], period.between(rd.SITE, "2026-10-01T06:00", "2026-10-06T06:00"))
    whole = span.meters[0]
    assert whole.contributions == sum(line.contributions for line in lines)
    assert whole.paid == sum(line.paid for line in lines)
    assert whole.closing == lines[-1].closing
    shifts = [make([path], period.shift(rd.SITE, f"2026-10-02/{name}"))
              for name in ("day", "swing", "graveyard")]
    assert sum(s.meters[0].contributions for s in shifts) == lines[1].contributions
    assert shifts[0].meters[0].opening == lines[1].opening


def test_the_same_ledgers_give_the_same_bytes(ledgers: dict[str, Path]) -> None:
    q4 = period.quarter(rd.SITE, "2026-Q4")
    first = json.dumps(tables.document(make(list(ledgers.values()), q4)), sort_keys=True)
    again = json.dumps(tables.document(make(list(ledgers.values()), q4)), sort_keys=True)
    assert first == again


def _tamper_copy(original: Path, folder: Path) -> Path:
    path = folder / original.name
    shutil.copy(original, path)
    return path


def test_a_row_removed_shows_a_variance_and_fails_verify(
    ledgers: dict[str, Path], tmp_path: Path
) -> None:
    path = _tamper_copy(ledgers["tcp-01"], tmp_path)
    conn = rd.untriggered(path)
    (seq,) = conn.execute(
        "SELECT seq FROM journal WHERE kind = 'wager_locked' ORDER BY seq LIMIT 1 OFFSET 20"
    ).fetchone()
    conn.execute("DELETE FROM journal WHERE seq = ?", (seq,))
    conn.execute("DELETE FROM postings WHERE seq = ?", (seq,))
    conn.close()
    report = make([path], period.quarter(rd.SITE, "2026-Q4"))
    assert not report.ok
    assert [m.meter for m in report.variances] == ["main"]
    assert report.variances[0].variance < 0  # the balances still hold the removed wager's share
    assert not report.sources[0].verified
    assert f"expected row {seq} here" in report.sources[0].problems[0]


def test_a_posting_forged_with_its_balance_fails_verify_over_the_period(
    ledgers: dict[str, Path], tmp_path: Path
) -> None:
    """The postings table and the balances table changed alike (the figures still add up):
    the period's postings are no longer the hashed rows' own, and the report says so."""
    path = _tamper_copy(ledgers["tcp-02"], tmp_path)
    conn = rd.untriggered(path)
    (seq,) = conn.execute("SELECT max(seq) FROM postings WHERE account = 'meter:main'").fetchone()
    conn.execute("UPDATE postings SET units = units + 7 WHERE account = 'meter:main' AND seq = ?",
                 (seq,))
    conn.execute("UPDATE balances SET units = units + 7 WHERE account = 'meter:main'")
    conn.close()
    report = make([path], period.quarter(rd.SITE, "2026-Q4"))
    assert not report.ok and not report.sources[0].verified
    assert any(f"row {seq}: the postings table differs" in p for p in report.sources[0].problems)


def test_an_adjustment_rewritten_with_its_chain_still_shows_the_variance(
    ledgers: dict[str, Path], tmp_path: Path
) -> None:
    """Someone edits the operator adjustment ($5 -> $50) in the row, its postings and the
    whole chain after it (the period's verify then passes): the balances the ledger recorded
    still say $5, so the meter's variance is $45 and the report is not clean."""
    path = _tamper_copy(ledgers["tcp-01"], tmp_path)
    conn = rd.untriggered(path)
    seq, text = conn.execute("SELECT seq, data FROM journal WHERE kind = 'meter_adjusted'"
                             ).fetchone()
    data = json.loads(text)
    forged = 10 * rd.ADJUSTED
    data["units"] = forged
    data["postings"] = [[a, forged if u > 0 else -forged] for a, u in data["postings"]]
    conn.execute("UPDATE journal SET data = ? WHERE seq = ?",
                 (json.dumps(data, sort_keys=True, separators=(",", ":")), seq))
    for leg, (_, units) in enumerate(data["postings"]):
        conn.execute("UPDATE postings SET units = ? WHERE seq = ? AND leg = ?", (units, seq, leg))
    rehash_from(conn, seq)
    head = conn.execute("SELECT hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()[0]
    conn.execute("UPDATE meta SET value = ? WHERE key = 'head_hash'", (head,))
    conn.close()
    report = make([path], period.quarter(rd.SITE, "2026-Q4"))
    assert report.sources[0].verified  # a consistent rewrite passes the chain
    assert [(m.meter, m.variance) for m in report.variances] == [("main", forged - rd.ADJUSTED)]
    assert not report.ok


def test_cli_exit_statuses(ledgers: dict[str, Path], tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text('[site]\ntime_zone = "America/New_York"\n'
                    'shifts = [{name = "day", start = "06:00"}]\n')
    args = ["report", "liability", "--quarter", "2026-Q4", "--config", str(site)]
    out = tmp_path / "r.json"
    ctl = [sys.executable, "-m", "progressived.cli.ctl"]
    clean = subprocess.run([*ctl, *args, "--db", str(ledgers["tcp-01"]), "--json", str(out)],
                           capture_output=True, text=True, timeout=120, check=False)
    assert clean.returncode == 0, clean.stderr
    assert "every meter reconciles" in clean.stdout
    assert json.loads(out.read_text())["ok"] is True
    broken = _tamper_copy(ledgers["tcp-02"], tmp_path)
    conn = rd.untriggered(broken)
    conn.execute("UPDATE balances SET units = units + 1 WHERE account = 'meter:main'")
    conn.close()
    bad = subprocess.run([*ctl, *args, "--db", str(broken)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert bad.returncode == 1, bad.stderr
    assert "VARIANCE: table tcp-02 meter main is off by -$0.000001 (-1 units)" in bad.stdout
    # the other statuses, in-process
    assert main([*args, "--db", str(tmp_path / "none.db")]) == 3
    assert main([*args, "--db", str(site)]) == 4
    assert main(["report", "liability", "--day", "2026-13-01", "--db", str(broken)]) == 2
    assert main(["report", "liability", "--shift", "2026-10-01/lunch", "--config", str(site),
                 "--db", str(broken)]) == 2
    site.write_text('[site]\ntime_zone = "Mars/Olympus"\n')
    assert main([*args, "--db", str(broken)]) == 2


def test_periods_follow_the_site_clock() -> None:
    """A gaming day across the end of daylight saving lasts 25 hours; the graveyard shift
    runs past midnight into the next calendar day; a quarter starts at its first gaming day."""
    fall_back = period.gaming_day(rd.SITE, "2026-10-31")
    assert fall_back.end - fall_back.start == timedelta(hours=25)
    grave = period.shift(rd.SITE, "2026-11-05/graveyard")
    assert (grave.start, grave.end) == (datetime(2026, 11, 6, 3, tzinfo=UTC),
                                        datetime(2026, 11, 6, 11, tzinfo=UTC))
    q4 = period.quarter(rd.SITE, "2026-Q4")
    assert q4.start == rd.Q4_OPENS
    assert q4.end == datetime(2027, 1, 1, 11, tzinfo=UTC)  # 06:00 EST
    with pytest.raises(period.PeriodError, match="no shift 'lunch'"):
        period.shift(rd.SITE, "2026-11-05/lunch")
    with pytest.raises(period.PeriodError, match="is not after"):
        period.between(rd.SITE, "2026-11-05T06:00", "2026-11-05T06:00")
    assert replace(q4, label="x").start == q4.start
