"""The link controller's ledger on real SQLite files: create, open with replay, group commit,
exactly once, crash safety (SIGKILL), ``ledger verify`` / ``meters`` / ``hits`` on it."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

from progressived.cli.ctl import main
from progressived.ledger import LedgerError, LedgerExists, LedgerMismatch, LedgerMissing
from progressived.link.core import params as lp
from progressived.link.store.audit import verify
from progressived.link.store.ledger import LinkLedger
from tests.conftest import ROOT
from tests.link_rig import AT, Rig, rehash_from, untriggered
from tests.link_sim import SimTable, deliver, link_params


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    r = Rig(tmp_path)
    r.play()
    return r


def kinds(path: Path) -> list[str]:
    c = sqlite3.connect(path)
    try:
        return [str(k) for (k,) in c.execute("SELECT kind FROM journal ORDER BY seq")]
    finally:
        c.close()


def test_create_journals_the_link_and_its_meters(tmp_path: Path) -> None:
    params = link_params()
    path = tmp_path / "link.db"
    LinkLedger.create(path, params, at=AT, software="test")
    assert kinds(path) == ["link_created", "meter_opened"]
    c = sqlite3.connect(path)
    meta = dict(c.execute("SELECT key, value FROM meta").fetchall())
    c.close()
    assert (meta["ledger_kind"], meta["link_id"], meta["table_id"]) == ("link", "link-a", "link-a")
    with pytest.raises(LedgerExists):
        LinkLedger.create(path, params, at=AT, software="test")
    with LinkLedger.open(path, params) as ledger:
        assert ledger.head.seq == 2 and ledger.book.balances["meter:pmg"] == params.meters[0].seed


def test_open_refuses_missing_foreign_and_other_links(rig: Rig, tmp_path: Path) -> None:
    rig.close()
    with pytest.raises(LedgerMissing):
        LinkLedger.open(tmp_path / "nope.db", rig.params)
    (tmp_path / "empty.db").touch()
    with pytest.raises(LedgerMissing):
        LinkLedger.open(tmp_path / "empty.db", rig.params)
    with pytest.raises(LedgerMismatch, match="table ledger"):
        LinkLedger.open(rig.sites["t1"].path, rig.params)
    other = dataclasses.replace(rig.params, link_id="link-b")
    with pytest.raises(LedgerMismatch, match="link-a"):
        LinkLedger.open(rig.link_path, other)


def test_reopening_replays_the_book_exactly(rig: Rig) -> None:
    before, head = rig.link.book, rig.link.head
    assert before.lseq == 10 and before.claims
    rig.link.close()
    with LinkLedger.open(rig.link_path, rig.params) as again:
        assert again.head == head
        assert again.book == before  # results, claims, groups, high-water marks, balances
    assert kinds(rig.link_path).count("link_applied") == 10


def test_a_sequence_is_applied_once_sqlite_refuses_the_second(tmp_path: Path) -> None:
    params = link_params()
    LinkLedger.create(tmp_path / "l.db", params, at=AT, software="t")
    with LinkLedger.open(tmp_path / "l.db", params) as ledger:
        msg = SimTable("t1").contribute(2)
        step = deliver(params, ledger.book, msg)
        ledger.commit([(step, 5)])
        book, head = ledger.book, ledger.head
        with pytest.raises(LedgerError, match="balances differ"):
            ledger.commit([(step, 6)])  # the same money twice: the postings check refuses it
        # a message refused on its content consumes its sequence and moves no money: only
        # the idempotency key TABLE:SEQ (SQLite's UNIQUE) stands between it and a second row
        odd = deliver(params, ledger.book, SimTable("t2").claim("five-aces"))
        assert odd.replies[0].status == "refused" and odd.events[0].postings == ()
        ledger.commit([(odd, 6)])
        book, head = ledger.book, ledger.head
        with pytest.raises(LedgerError, match="UNIQUE"):
            ledger.commit([(odd, 7)])
        assert (ledger.book, ledger.head) == (book, head)
        repeat = deliver(params, ledger.book, msg)  # the book answers a repeat from memory
        assert repeat.events == () and repeat.replies[0].lseq == 1 and ledger.book.lseq == 2
        ledger.commit([(repeat, 7)])
        assert ledger.head == head


def test_a_batch_that_does_not_follow_the_book_is_refused(tmp_path: Path) -> None:
    params = link_params()
    LinkLedger.create(tmp_path / "l.db", params, at=AT, software="t")
    with LinkLedger.open(tmp_path / "l.db", params) as ledger:
        t1 = SimTable("t1")
        first = deliver(params, ledger.book, t1.contribute(2))
        forged = dataclasses.replace(first, state=dataclasses.replace(first.state, balances={}))
        with pytest.raises(LedgerError, match="balances differ"):
            ledger.commit([(forged, 1)])
        assert ledger.head.seq == 2


def test_refusals_are_journaled_and_change_nothing(tmp_path: Path) -> None:
    params = link_params()
    LinkLedger.create(tmp_path / "l.db", params, at=AT, software="t")
    with LinkLedger.open(tmp_path / "l.db", params) as ledger:
        from progressived.link.core import book
        step = book.receive(
            params, ledger.book, b"{not json", topic_table="t1", at_ms=1, head=ledger.head
        )
        ledger.commit([(step, 1)])
        assert ledger.book.lseq == 0
    assert kinds(tmp_path / "l.db")[-1] == "link_refused"
    assert verify(tmp_path / "l.db").ok


def test_added_meter_is_a_recorded_parameter_change(rig: Rig) -> None:
    rig.close()
    extra = lp.MeterSpec(
        "bonus", seed=50_000_000, rate=Fraction(1, 100), hands={"four-of-a-kind": Fraction(1)}
    )
    params = dataclasses.replace(rig.params, meters=(*rig.params.meters, extra))
    with LinkLedger.open(rig.link_path, params, at=AT) as ledger:
        assert ledger.book.balances["meter:bonus"] == 50_000_000
    assert kinds(rig.link_path)[-2:] == ["parameter_changed", "meter_opened"]
    with LinkLedger.open(rig.link_path, params, at=AT) as ledger:  # recorded: nothing new
        assert ledger.book.epochs["bonus"] == 0
    assert kinds(rig.link_path)[-1] == "meter_opened"
    assert verify(rig.link_path).ok


# -- ledger verify / meters / hits ---------------------------------------------------------


def test_verify_meters_and_hits_on_a_link_ledger(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    rig.close()
    db = str(rig.link_path)
    assert main(["ledger", "verify", "--db", db, "--no-record"]) == 0
    assert "OK: link link-a" in capsys.readouterr().out
    assert main(["ledger", "verify", "--db", db, "--json", "--no-record", "--deep"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ledger_kind"] == "link" and report["identity_gap_units"] == 0
    head = f"{report['head_seq']}:{report['head_hash']}"
    assert main(["ledger", "verify", "--db", db, "--head", head, "--no-record"]) == 0
    capsys.readouterr()
    assert main(["meters", "--db", db, "--json"]) == 0
    meters = json.loads(capsys.readouterr().out)
    pmg = meters["meters"]["pmg"]
    assert pmg["paid_attendant_units"] > 0 and pmg["identity_gap_units"] == 0
    assert meters["messages_applied"] == {"t1": 5, "t2": 5}
    assert main(["hits", "--db", db, "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [(h["table_id"], h["hand"], h["state"]) for h in hits] == [
        ("t2", "royal-flush", "paid"),
        ("t1", "straight-flush", "rejected"),
    ]
    assert main(["meters", "--db", db]) == 0 and "link link-a" in capsys.readouterr().out
    assert main(["hits", "--db", db]) == 0 and "royal-flush" in capsys.readouterr().out


def test_a_table_ledger_still_verifies_as_before(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    rig.close()
    assert main(["ledger", "verify", "--db", str(rig.sites["t1"].path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ledger_kind"] == "table"


def test_verify_names_a_tampered_link_row(rig: Rig, capsys: pytest.CaptureFixture[str]) -> None:
    rig.close()
    c = untriggered(rig.link_path)
    seq, data = c.execute(
        "SELECT seq, data FROM journal WHERE kind = 'link_applied' ORDER BY seq LIMIT 1"
    ).fetchone()
    c.execute(
        "UPDATE journal SET data = ? WHERE seq = ?", (data.replace("3000000", "3000001"), seq)
    )
    c.close()
    assert main(["ledger", "verify", "--db", str(rig.link_path), "--no-record"]) == 1
    assert f"FAILED at row {seq}:" in capsys.readouterr().out
    with pytest.raises(LedgerMismatch, match=f"row {seq}"):
        LinkLedger.open(rig.link_path, rig.params)


def test_a_consistently_rewritten_result_fails_the_replay(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    """Chain, postings and balances all agree after this rewrite: only the replay sees that
    the stored award is not what the book gives."""
    rig.close()
    c = untriggered(rig.link_path)
    seq, data = c.execute(
        "SELECT seq, data FROM journal WHERE kind = 'link_applied' "
        "AND json_extract(data, '$.message.type') = 'claim' ORDER BY seq LIMIT 1"
    ).fetchone()
    parsed = json.loads(data)
    parsed["result"]["awards"][0]["units"] += 1
    text = json.dumps(parsed, sort_keys=True, separators=(",", ":"))
    c.execute("UPDATE journal SET data = ? WHERE seq = ?", (text, seq))
    rehash_from(c, seq)
    c.close()
    assert main(["ledger", "verify", "--db", str(rig.link_path), "--json", "--no-record"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["first_bad_seq"] == seq
    assert "stored result differs" in report["problems"][0]["message"]


# -- crash safety ---------------------------------------------------------------------------

WRITER = """
import sys
from pathlib import Path
from progressived.link.store.ledger import LinkLedger
from tests.link_sim import SimTable, deliver, link_params

params = link_params()
path = Path(sys.argv[1])
every = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
tables = [SimTable(t) for t in sorted(params.tables)]
with LinkLedger.open(path, params, snapshot_every=every) as ledger:
    state, n = ledger.book, 0
    for t in tables:  # continue each table's sequence after what was applied
        t.seq = state.tables[t.table].hwm if t.table in state.tables else 0
    while True:
        steps = []
        for i in range(20):
            t = tables[(n + i) % len(tables)]
            step = deliver(params, state, t.contribute(1 + i % 3), at_ms=n * 100 + i)
            steps.append((step, n * 100 + i))
            state = step.state
        ledger.commit(steps)
        n += 1
        print(n, ledger.book.lseq, flush=True)
"""


def _kill_while_writing(path: Path, after_lines: int, snapshot_every: int = 5000) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(snapshot_every)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    last = 0
    try:
        for _ in range(after_lines):
            line = proc.stdout.readline()
            assert line, "the writer stopped"
            last = int(line.split()[1])
        time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)  # in the middle of a later commit, most likely
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    return last


def test_sigkill_mid_commit_loses_nothing_committed_and_doubles_nothing(tmp_path: Path) -> None:
    params = link_params()
    path = tmp_path / "link.db"
    LinkLedger.create(path, params, at=AT, software="t")
    for round_no in range(3):
        acknowledged = _kill_while_writing(path, 5 + round_no)
        with LinkLedger.open(path, params) as ledger:  # replays and checks every row
            assert ledger.book.lseq >= acknowledged
            assert ledger.book.lseq % 20 == 0  # whole batches only: one transaction each
        report = verify(path)
        assert report.ok, report.problems
    c = sqlite3.connect(path)
    applied, distinct = c.execute(
        "SELECT count(*), count(DISTINCT idem_key) FROM journal WHERE kind = 'link_applied'"
    ).fetchone()
    per_table = c.execute(
        "SELECT json_extract(data, '$.table'), count(*), max(json_extract(data, '$.seq')) "
        "FROM journal WHERE kind = 'link_applied' GROUP BY 1"
    ).fetchall()
    c.close()
    assert applied == distinct
    assert all(count == top for _, count, top in per_table)  # gapless, each seq once


def test_every_applied_row_is_stored_as_dumps_of_its_data(rig: Rig) -> None:
    """The group commit writes a link_applied row's JSON text directly from the message's
    and the result's canonical bytes (journal.applied_text); the text must be exactly what
    the ledger's own encoder makes of the row's data, or the hash chain's meaning drifts."""
    from progressived.ledger.rows import dumps
    from progressived.link.core import journal
    conn = sqlite3.connect(rig.link_path)
    rows = conn.execute("SELECT data FROM journal WHERE kind = 'link_applied'").fetchall()
    conn.close()
    assert len(rows) == 10
    for (text,) in rows:
        assert dumps(json.loads(text)) == text
    # And the function itself, on a claim with an award and a reason with non-ASCII text.
    step = rig.deliver([rig.sites["t1"].claim()])[0]
    [event] = step.events
    assert isinstance(event, journal.Applied)
    odd = dataclasses.replace(
        event, result=dataclasses.replace(event.result, reason="caf\u00e9 \u2603 \"q\"")
    )
    assert journal.applied_text(odd, 123) == dumps(journal.applied(odd, 123))
