"""``progressivectl link reconcile`` on real ledgers: agreement, every kind of difference,
witnessed heads catching a consistent rewrite of either side, and the exit statuses."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from progressived.cli.ctl import main
from progressived.link.core.messages import to_dict
from progressived.link.store.audit import verify
from tests.link_rig import Rig, rehash_from, untriggered


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    r = Rig(tmp_path)
    r.play()
    return r


def reconcile(
    capsys: pytest.CaptureFixture[str], rig: Rig, *extra: str
) -> tuple[int, dict[str, Any]]:
    rig.close()
    args = ["link", "reconcile", "--link-db", str(rig.link_path), "--json", *extra]
    for path in rig.table_paths():
        args += ["--table-db", str(path)]
    capsys.readouterr()
    status = main(args)
    return status, json.loads(capsys.readouterr().out)


def kinds(report: dict[str, Any]) -> set[str]:
    return {d["kind"] for d in report["differences"]}


def test_agreeing_ledgers_have_no_difference(rig: Rig, capsys: pytest.CaptureFixture[str]) -> None:
    status, report = reconcile(capsys, rig)
    assert (status, report["differences"], report["in_flight"]) == (0, [], [])
    assert report["contributions"]["t1/pmg"] == {"link_units": 8_000_000, "table_units": 8_000_000}
    assert report["contributions"]["t2/pmg"] == {"link_units": 2_000_000, "table_units": 2_000_000}
    assert report["tables"]["t1"]["messages"] == 5
    args = ["link", "reconcile", "--link-db", str(rig.link_path)]
    args += [a for p in rig.table_paths() for a in ("--table-db", str(p))]
    assert main(args) == 0
    assert capsys.readouterr().out.strip().endswith("0 in flight, 0 difference(s)")


def test_messages_in_flight_are_not_differences(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    t1, t2 = rig.sites["t1"], rig.sites["t2"]
    t1.contribute(2)  # journaled as sent, lost on the way
    rig.deliver([t2.contribute(1)], answer=False)  # applied, the answer not yet journaled
    status, report = reconcile(capsys, rig)
    assert (status, report["differences"]) == (0, [])
    assert [(f["table"], f["state"]) for f in report["in_flight"]] == [
        ("t1", "unanswered"),
        ("t2", "answer-not-journaled"),
    ]


def test_an_amount_changed_by_one_unit_is_a_difference(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    t1 = rig.sites["t1"]
    msg = t1.contribute(2, journal=False)
    wrong = to_dict(msg)
    wrong["wagers"][0]["units"] += 1
    t1.journal_sent(msg, wrong)  # the table recorded one unit more than it sent
    rig.deliver([msg])
    status, report = reconcile(capsys, rig)
    assert status == 1
    assert kinds(report) == {"message-differs", "contribution-differs"}
    diff = next(d for d in report["differences"] if d["kind"] == "contribution-differs")
    assert (diff["table"], diff["table_units"] - diff["link_units"]) == ("t1", 1)


def test_a_row_missing_on_either_side_is_a_difference(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    t1, t2 = rig.sites["t1"], rig.sites["t2"]
    rig.deliver([t1.contribute(2, journal=False)])  # applied at the link, never journaled
    lost = t2.contribute(3)  # sent, not arrived: in flight, not a difference
    status, report = reconcile(capsys, rig)
    assert status == 1
    found = {(d["kind"], d["table"], d["seq"]) for d in report["differences"]}
    assert ("missing-at-table", "t1", t1.seq) in found
    assert ("contribution-differs", "t1", None) in found
    assert [f["seq"] for f in report["in_flight"]] == [lost.seq]


def test_a_final_result_the_link_has_no_row_for(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    t2 = rig.sites["t2"]
    msg = t2.contribute(3)
    step = rig.deliver([msg], answer=False)[0]
    rig.link.close()
    # the link ledger as it was before that message: a restored old backup
    c = untriggered(rig.link_path)
    c.execute("DELETE FROM postings WHERE seq = (SELECT max(seq) FROM journal)")
    c.execute("DELETE FROM journal WHERE seq = (SELECT max(seq) FROM journal)")
    c.execute("DELETE FROM idempotency WHERE key = ?", (f"t2:{msg.seq}",))
    rehash_from(c, 1)
    c.close()
    t2.on_result(step.replies[0])
    status, report = reconcile(capsys, rig)
    assert status == 1
    found = {(d["kind"], d["table"], d["seq"]) for d in report["differences"]}
    assert ("missing-at-link", "t2", msg.seq) in found
    assert any(k == "ledger-broken" for k, _, _ in found)  # balances no longer add up


def test_a_changed_result_or_award_at_the_table_is_a_difference(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    t1 = rig.sites["t1"]
    msg = t1.claim()
    step = rig.deliver([msg], answer=False)[0]
    result = step.replies[0]
    award = result.awards[0]
    t1.ledger.record(
        "link_result",
        {
            "link": "link-a",
            "seq": msg.seq,
            "id": msg.id,
            "status": result.status,
            "code": result.code,
            "result": {**to_dict(result), "awards": [{**to_dict(award), "units": award.units - 1}]},
        },
        at="2026-11-23T17:00:00Z",
    )
    status, report = reconcile(capsys, rig)
    assert status == 1
    assert kinds(report) == {"result-differs"}
    assert "awards" in report["differences"][0]["message"]


def test_a_consistent_rewrite_of_a_table_ledger_is_caught_by_the_links_witness(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    rig.close()
    path = rig.sites["t1"].path
    c = untriggered(path)
    (first,) = c.execute("SELECT min(seq) FROM journal WHERE kind = 'link_sent'").fetchone()
    c.execute("UPDATE journal SET actor = 'mallory' WHERE seq = ?", (first - 1,))
    rehash_from(c, first - 1)
    c.close()
    assert verify(path).ok  # the table's own chain cannot tell
    status, report = reconcile(capsys, rig)
    assert status == 1
    assert kinds(report) == {"witness-table"}
    assert {d["table"] for d in report["differences"]} == {"t1"}


def test_a_consistent_rewrite_of_the_link_ledger_is_caught_by_the_tables_witness(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    rig.close()
    c = untriggered(rig.link_path)
    c.execute("UPDATE journal SET actor = 'mallory' WHERE seq = 1")
    rehash_from(c, 1)
    c.close()
    assert verify(rig.link_path).ok  # the link's own chain and replay cannot tell
    status, report = reconcile(capsys, rig)
    assert status == 1
    assert kinds(report) == {"witness-link"}


def test_a_broken_ledger_is_a_difference(rig: Rig, capsys: pytest.CaptureFixture[str]) -> None:
    rig.close()
    c = untriggered(rig.sites["t2"].path)
    c.execute("UPDATE journal SET actor = 'mallory' WHERE seq = 3")
    c.close()
    status, report = reconcile(capsys, rig)
    assert status == 1
    broken = [d for d in report["differences"] if d["kind"] == "ledger-broken"]
    assert broken and broken[0]["table"] == "t2" and broken[0]["seq"] == 3


def test_missing_and_wrong_ledgers_are_one_line_with_their_status(
    rig: Rig, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rig.close()
    link, table = str(rig.link_path), str(rig.sites["t1"].path)
    (tmp_path / "junk.db").write_text("not a database at all" * 100)
    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE x (y)").connection.close()
    cases = [
        ([link, str(tmp_path / "nope.db")], 3),
        ([str(tmp_path / "nope.db"), table], 3),
        ([table, table], 4),  # a table ledger as the link's
        ([link, link], 4),  # the link's as a table's
        ([link, str(tmp_path / "junk.db")], 4),
        ([link, str(tmp_path / "other.db")], 4),
    ]
    for (link_db, table_db), expected in cases:
        capsys.readouterr()
        args = ["link", "reconcile", "--link-db", link_db, "--table-db", table_db, "--json"]
        assert main(args) == expected, (link_db, table_db)
        captured = capsys.readouterr()
        assert captured.out == ""
        assert len(captured.err.strip().splitlines()) == 1
        assert captured.err.startswith("progressivectl link reconcile: ")
