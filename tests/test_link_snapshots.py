"""The link ledger's snapshots on real SQLite files: written every N rows in the commit's
transaction, exact canonical JSON, opening from the latest one (only the rows after it
replayed), the full replay when none is usable, ``ledger verify`` comparing each with the
book replayed up to its row, and a SIGKILL in the middle of a commit that writes one."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from progressived.cli.ctl import main
from progressived.link.core import snapshot
from progressived.link.core.params import LinkParams
from progressived.link.store import audit
from progressived.link.store.audit import verify
from progressived.link.store.ledger import LinkLedger
from tests.link_rig import AT, Rig, untriggered
from tests.link_sim import SimTable, deliver, link_params
from tests.test_link_ledger import _kill_while_writing


def full_replay(path: Path) -> tuple[dict[str, object], str]:
    """The book replayed from every row (no snapshot), as (recorded parameters, its
    snapshot text: exact, the order of order-bearing maps included)."""
    c = sqlite3.connect(path)
    try:
        head = int(c.execute("SELECT max(seq) FROM journal").fetchone()[0])
        replay = audit.rebuild(c, head)
    finally:
        c.close()
    recorded = replay.recorded or {}
    return recorded, snapshot.dumps(recorded, replay.state)


def exact(ledger: LinkLedger) -> str:
    return snapshot.dumps(ledger._recorded, ledger.book)


def fill(path: Path, params: LinkParams, messages: int, every: int, group: int = 100) -> None:
    """``messages`` contributions from every table in turn, ``group`` per commit."""
    LinkLedger.create(path, params, at=AT, software="t", snapshot_every=every)
    tables = [SimTable(t) for t in sorted(params.tables)]
    with LinkLedger.open(path, params, at=AT, snapshot_every=every) as ledger:
        done = 0
        while done < messages:
            state, steps = ledger.book, []
            for _ in range(min(group, messages - done)):
                t = tables[done % len(tables)]
                step = deliver(params, state, t.contribute(1 + done % 3), at_ms=done)
                steps.append((step, done))
                state = step.state
                done += 1
            ledger.commit(steps)


def snapshot_rows(path: Path) -> list[int]:
    c = sqlite3.connect(path)
    try:
        return [int(s) for (s,) in c.execute("SELECT seq FROM snapshots ORDER BY seq")]
    finally:
        c.close()


# -- the format ------------------------------------------------------------------------------


def test_a_snapshot_round_trips_exactly_as_canonical_integer_json(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.play()  # contributions, a reversal, a paid claim, a rejected one, hits, epochs
    t1 = rig.sites["t1"]
    rig.deliver([t1.contribute(n) for n in range(1, 12)])  # more than 8: oldest dropped
    rig.deliver([t1.claim("straight-flush")])  # a standing hit (a rejected one names none)
    state = rig.link.book
    assert state.claims and state.groups and state.hits and state.contributions
    text = snapshot.dumps(rig.link._recorded, state)
    recorded, back = snapshot.loads(text)
    assert back == state and recorded == rig.link._recorded
    assert snapshot.dumps(recorded, back) == text
    # the order that matters survives: a table's reversible contributions, oldest first
    for table, done in state.contributions.items():
        assert list(back.contributions[table]) == list(done)
    for table, track in state.tables.items():
        assert list(back.tables[table].results) == list(track.results)
    # canonical: sorted keys, no spaces, ASCII; every number an integer
    data = json.loads(text)
    assert json.dumps(data, sort_keys=True, separators=(",", ":")) == text
    assert text.isascii()

    def numbers(value: object) -> list[object]:
        if isinstance(value, dict):
            return [n for v in value.values() for n in numbers(v)]
        if isinstance(value, list):
            return [n for v in value for n in numbers(v)]
        return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []

    assert numbers(data) and all(type(n) is int for n in numbers(data))
    with pytest.raises(snapshot.SnapshotError, match="integer"):
        snapshot.loads(text.replace('"lseq":', '"lseq":1.5,"x":', 1))
    rig.close()


def test_a_fraction_in_the_book_is_refused_not_written(tmp_path: Path) -> None:
    from dataclasses import replace
    from fractions import Fraction

    rig = Rig(tmp_path)
    rig.play()
    balances: dict[str, object] = {**rig.link.book.balances, "meter:pmg": Fraction(1, 3)}
    odd = replace(rig.link.book, balances=balances)
    with pytest.raises(snapshot.SnapshotError, match="not an integer"):
        snapshot.dumps(rig.link._recorded, odd)
    rig.close()


# -- writing and opening ----------------------------------------------------------------------


def test_commits_write_a_snapshot_every_n_rows_and_open_replays_only_after_it(
    tmp_path: Path,
) -> None:
    params = link_params()
    path = tmp_path / "link.db"
    fill(path, params, 1_050, every=200, group=30)
    rows = snapshot_rows(path)
    # a snapshot at the end of the first commit that reaches 200 rows since the last one
    assert rows and all(b - a in range(200, 230) for a, b in zip([0, *rows], rows, strict=False))
    with LinkLedger.open(path, params, snapshot_every=200) as ledger:
        assert ledger.recovery.snapshot_seq == rows[-1]
        assert ledger.recovery.replayed == ledger.head.seq - rows[-1] < 230
        recorded, expected = full_replay(path)
        assert exact(ledger) == expected  # equal to the full replay, order included
        assert ledger._recorded == recorded
        # and it goes on: the next snapshot counts from the one it opened from
        t = SimTable("t1", seq=ledger.book.tables["t1"].hwm)
        state, steps = ledger.book, []
        for i in range(200):
            step = deliver(params, state, t.contribute(1), at_ms=10**6 + i)
            steps.append((step, 10**6 + i))
            state = step.state
        ledger.commit(steps)
        head = ledger.head.seq
    assert snapshot_rows(path)[-1] == head
    report = verify(path)
    assert report.ok, report.problems
    assert report.snapshots == len(rows) + 1


def test_a_long_link_ledger_opens_from_its_latest_snapshot(tmp_path: Path) -> None:
    """What the snapshots exist for: a long ledger opens replaying only the rows after its
    latest snapshot (at most about the interval), to the very same book as the full replay.
    5,000 rows with a snapshot every 1,000 here (counts, not seconds: the seconds at the
    shipped interval of 50,000 are measured figures, docs/link.md "Opening")."""
    every = 1_000
    params = link_params(tables=10, keep_results=256)
    path = tmp_path / "link.db"
    fill(path, params, 5 * every, every=every)
    assert len(snapshot_rows(path)) == 5
    bare = tmp_path / "bare.db"  # the same ledger without its snapshots
    shutil.copy(path, bare)
    c = untriggered(bare)
    c.execute("DELETE FROM snapshots")
    c.close()
    with LinkLedger.open(bare, params) as full:
        assert full.recovery.snapshot_seq == 0 and full.recovery.replayed == full.head.seq
        assert full.recovery.why_full == "the ledger has no snapshot"
        whole = exact(full)
    with LinkLedger.open(path, params) as quick:
        assert quick.recovery.snapshot_seq == snapshot_rows(path)[-1]
        assert quick.recovery.replayed < every + 100
        assert quick.recovery.replayed * 4 < full.recovery.replayed
        assert exact(quick) == whole


def test_an_unreadable_snapshot_falls_back_to_an_older_one_then_to_every_row(
    tmp_path: Path,
) -> None:
    params = link_params()
    path = tmp_path / "link.db"
    fill(path, params, 400, every=100, group=20)
    rows = snapshot_rows(path)
    assert len(rows) == 4
    c = untriggered(path)
    c.execute(
        'UPDATE snapshots SET state = \'{"format":1,"kind":"link"}\' WHERE seq = ?', (rows[-1],)
    )
    c.close()
    recorded, expected = full_replay(path)
    with capture_logs() as logs, LinkLedger.open(path, params, snapshot_every=100) as ledger:
        assert ledger.recovery.snapshot_seq == rows[-2]
        assert exact(ledger) == expected
    assert any(
        e["event"] == "link ledger snapshot unusable" and e["snapshot_seq"] == rows[-1]
        for e in logs
    )
    c = untriggered(path)
    c.execute("UPDATE snapshots SET state = '[]'")
    c.close()
    with capture_logs() as logs, LinkLedger.open(path, params, snapshot_every=100) as ledger:
        assert ledger.recovery.snapshot_seq == 0
        assert "cannot be read" in ledger.recovery.why_full
        assert exact(ledger) == expected
    assert any(e["event"] == "link ledger opened by replaying every row" for e in logs)


def test_a_forged_snapshot_is_named_by_verify_and_not_trusted_by_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Triggers dropped, the latest snapshot rewritten: money (a balance) or not (a table's
    high-water mark). ``ledger verify`` names the row; opening notices the money at once and
    a wrong high-water mark at the first row after it, and replays every row instead."""
    params = link_params()
    path = tmp_path / "link.db"
    fill(path, params, 430, every=100, group=20)
    rows = snapshot_rows(path)
    pristine = tmp_path / "pristine.db"
    shutil.copy(path, pristine)
    _, expected = full_replay(path)
    for edit in ("balance", "hwm"):
        shutil.copy(pristine, path)
        c = untriggered(path)
        (text,) = c.execute("SELECT state FROM snapshots WHERE seq = ?", (rows[-1],)).fetchone()
        data = json.loads(text)
        if edit == "balance":
            data["balances"]["meter:pmg"] += 10_000
        else:
            data["tables"]["t1"]["hwm"] -= 1
        forged = json.dumps(data, sort_keys=True, separators=(",", ":"))
        c.execute("UPDATE snapshots SET state = ? WHERE seq = ?", (forged, rows[-1]))
        c.close()
        report = verify(path)
        assert not report.ok
        assert report.first_bad_seq == rows[-1], report.problems
        assert any(
            p.seq == rows[-1] and "differs from the book replayed" in p.message
            for p in report.problems
        )
        assert main(["ledger", "verify", "--db", str(path), "--no-record"]) == 1
        assert f"row {rows[-1]}" in capsys.readouterr().out
        with capture_logs() as logs, LinkLedger.open(path, params) as ledger:
            assert ledger.recovery.snapshot_seq == 0  # replayed every row
            assert exact(ledger) == expected
        assert any(e["event"].startswith("link ledger snapshot refused") for e in logs)


def test_a_snapshot_naming_another_hash_or_added_after_the_fact_is_caught(
    tmp_path: Path,
) -> None:
    params = link_params()
    path = tmp_path / "link.db"
    fill(path, params, 230, every=100, group=20)
    rows = snapshot_rows(path)
    c = sqlite3.connect(path, isolation_level=None)
    # no trigger stands in the way of an INSERT: a forged snapshot at a later row
    head, head_hash = c.execute(
        "SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    (text,) = c.execute("SELECT state FROM snapshots WHERE seq = ?", (rows[-1],)).fetchone()
    c.execute("INSERT INTO snapshots (seq, hash, state) VALUES (?, ?, ?)", (head, head_hash, text))
    c.close()
    report = verify(path)
    assert {p.seq for p in report.problems} == {head}, report.problems  # state and balances
    assert any("differs from the book replayed" in p.message for p in report.problems)
    with LinkLedger.open(path, params) as ledger:  # lseq and the rest disagree: every row
        assert ledger.recovery.snapshot_seq in (0, rows[-1])
        assert exact(ledger) == full_replay(path)[1]
    c = untriggered(path)
    c.execute("DELETE FROM snapshots WHERE seq = ?", (head,))
    c.execute("UPDATE snapshots SET hash = ? WHERE seq = ?", ("0" * 64, rows[-1]))
    c.close()
    report = verify(path)
    assert any(p.seq == rows[-1] and "names another hash" in p.message for p in report.problems), (
        report.problems
    )
    with LinkLedger.open(path, params) as ledger:
        assert ledger.recovery.snapshot_seq == rows[-2]
        assert exact(ledger) == full_replay(path)[1]


def test_sigkill_mid_commit_with_snapshots_reopens_to_the_full_replay(tmp_path: Path) -> None:
    params = link_params()
    path = tmp_path / "link.db"
    LinkLedger.create(path, params, at=AT, software="t")
    for round_no in range(3):
        acknowledged = _kill_while_writing(path, 8 + round_no, snapshot_every=30)
        with LinkLedger.open(path, params, snapshot_every=30) as ledger:
            assert ledger.book.lseq >= acknowledged
            assert ledger.book.lseq % 20 == 0  # whole batches only
            assert ledger.recovery.snapshot_seq > 0
            assert ledger.recovery.replayed < 30 + 20
            assert exact(ledger) == full_replay(path)[1]
        report = verify(path)
        assert report.ok, report.problems
    assert len(snapshot_rows(path)) >= 3


# -- docs/link.md's sqlite3 recipes ------------------------------------------------------------


def link_recipes() -> dict[str, str]:
    import re

    from tests.conftest import ROOT

    text = (ROOT / "docs" / "link.md").read_text()
    return dict(re.findall(r"<!-- audit-(link-[a-z-]+) -->\n```sh\n(.*?)```", text, re.S))


def run_recipe(code: str, db: Path) -> str:
    import subprocess

    done = subprocess.run(
        ["bash", "-c", code.replace("link.db", str(db))],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="needs the sqlite3 tool")
def test_the_documented_snapshot_recipes_are_silent_and_catch_their_tamper(
    tmp_path: Path,
) -> None:
    recipes = link_recipes()
    assert set(recipes) == {
        "link-snapshot-hash",
        "link-snapshot-balances",
        "link-snapshot-hwm",
        "link-snapshot-results",
    }
    params = link_params()
    path = tmp_path / "link.db"
    fill(path, params, 330, every=100, group=20)
    last = snapshot_rows(path)[-1]
    for code in recipes.values():
        assert run_recipe(code, path) == ""
    pristine = tmp_path / "pristine.db"
    shutil.copy(path, pristine)

    def edit(name: str, d: dict[str, Any]) -> None:
        if name == "link-snapshot-balances":
            d["balances"]["meter:pmg"] = 1
        elif name == "link-snapshot-hwm":
            d["tables"]["t2"]["hwm"] = 1
        elif name == "link-snapshot-results":
            d["tables"]["t3"]["results"][-1][2]["reason"] = "forged"

    for name in recipes:  # link-snapshot-hash: the hash column instead, below
        shutil.copy(pristine, path)
        c = untriggered(path)
        (text,) = c.execute("SELECT state FROM snapshots WHERE seq = ?", (last,)).fetchone()
        data = json.loads(text)
        edit(name, data)
        forged = json.dumps(data, sort_keys=True, separators=(",", ":"))
        c.execute("UPDATE snapshots SET state = ? WHERE seq = ?", (forged, last))
        if name == "link-snapshot-hash":
            c.execute("UPDATE snapshots SET hash = ? WHERE seq = ?", ("0" * 64, last))
        c.close()
        assert run_recipe(recipes[name], path).startswith(str(last)), name
        assert any(p.seq == last for p in verify(path).problems), name
