"""``progressived demo --tables N --headless``: a linked meter across real processes, end to
end — the link controller, N table daemons, their boards, two royal flushes moments apart,
a link outage — judged by the reconciliation it ends with."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

DEMO = [sys.executable, "-m", "progressived.cli.daemon", "demo"]
UNITS_PER_CENT = 10_000


def test_linked_demo_plays_and_reconciles_with_no_difference(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*DEMO, "--tables", "3", "--headless", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = proc.stdout
    # The two royals, ordered by the link: the first takes the meter, the second the reset one.
    first = out.index("LINKED METER  hit at pmg-01 seat 3: royal-flush")
    second = out.index("LINKED METER  hit at pmg-02 seat 5: royal-flush")
    assert first < second
    assert "pmg-01  CLOSED (link-down)" in out and "pmg-01  open again (link-down)" in out
    assert "pmg-03  seat 7 straight-flush: supervisor confirmed" in out
    report = json.loads(out[out.index("{\n") : out.rindex("}") + 1])
    assert report["differences"] == [] and report["in_flight"] == []
    assert set(report["tables"]) == {"pmg-01", "pmg-02", "pmg-03"}
    assert out.rstrip().endswith("no differences")
    # Both royals were paid from the link's ledger, in its log order, and the amounts the
    # tables journaled are the link's.
    link = sqlite3.connect(tmp_path / "link.db")
    paid = link.execute(
        "SELECT units FROM balances WHERE account = 'paid_attendant:main'"
    ).fetchone()[0]
    link.close()
    confirmed = 0
    for table in ("pmg-01", "pmg-02", "pmg-03"):
        db = sqlite3.connect(tmp_path / table / "ledger.db")
        for (data,) in db.execute("SELECT data FROM journal WHERE kind = 'award_confirmed'"):
            confirmed += json.loads(data)["units"]
        db.close()
    assert confirmed == paid > 2_000 * 100 * UNITS_PER_CENT


def test_tables_wants_two_or_more() -> None:
    proc = subprocess.run([*DEMO, "--tables", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "progressived demo: --tables wants N >= 2 (1 is the single table)"
