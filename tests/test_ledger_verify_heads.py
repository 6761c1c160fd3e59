"""``ledger verify``'s modes: the recorded verified head, ``--since-verified``, ``--full``
and witnessed ``--head SEQ:HASH``; each with the tampering it catches, and the one it
documents it cannot (an old row edited under the verified head, for the quick mode)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from bench.stress import demo_params, drive
from progressived.cli.ctl import main
from progressived.ledger import Ledger, chain
from progressived.ledger.heads import parse_head, read_verified, sidecar_path
from progressived.ledger.verify import verify

AT = "2026-11-21T19:00:00.000000Z"
PARAMS = demo_params("t-h")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("heads") / "ledger.db"
    with Ledger.open(path, PARAMS, at=AT, snapshot_every=100) as ledger:
        drive(ledger, PARAMS, rounds=30, seed=7, run="r", group=4)
        ledger.checkpoint()
    return path


@pytest.fixture
def db(pristine: Path, tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    shutil.copy(pristine, path)
    return path


def grow(db: Path, rounds: int = 5, run: str = "s") -> None:
    with Ledger.open(db, PARAMS, at=AT, snapshot_every=100) as ledger:
        drive(ledger, PARAMS, rounds=rounds, seed=11, run=run, group=4)
        ledger.checkpoint()


def untriggered(db: Path) -> sqlite3.Connection:
    """A connection of someone who dropped the append-only triggers."""
    c = sqlite3.connect(db, isolation_level=None)
    for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        c.execute(f"DROP TRIGGER {name}")
    return c


def head_of(db: Path) -> tuple[int, str]:
    c = sqlite3.connect(db)
    seq, h = c.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    c.close()
    return int(seq), str(h)


def verify_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    capsys.readouterr()
    status = main(["ledger", "verify", "--json", *args])
    return status, json.loads(capsys.readouterr().out)


def edit_wager(c: sqlite3.Connection, seq: int) -> None:
    data = c.execute("SELECT data FROM journal WHERE seq = ?", (seq,)).fetchone()[0]
    assert '"units":1000000' in data
    c.execute(
        "UPDATE journal SET data = ? WHERE seq = ?",
        (data.replace('"units":1000000', '"units":2000000', 1), seq),
    )


def wager_rows(c: sqlite3.Connection, after: int = 0) -> list[int]:
    return [
        int(s)
        for (s,) in c.execute(
            "SELECT seq FROM journal WHERE kind = 'wager_locked' AND seq > ? ORDER BY seq",
            (after,),
        )
    ]


def rehash_from(c: sqlite3.Connection, first: int) -> None:
    """Rewrite the chain consistently from row ``first`` on, and ``meta``'s head."""
    prev = c.execute("SELECT hash FROM journal WHERE seq = ?", (first - 1,)).fetchone()
    prev_hash = chain.GENESIS if prev is None else str(prev[0])
    text_sql = chain.ROWS_SQL.replace("prev_hash || '|' ||", "", 1)
    for seq, _, _, text in c.execute(text_sql, (first - 1, 1 << 62)).fetchall():
        new = chain.link(prev_hash, text)
        c.execute("UPDATE journal SET prev_hash = ?, hash = ? WHERE seq = ?", (prev_hash, new, seq))
        prev_hash = new
    head = c.execute("SELECT max(seq) FROM journal").fetchone()[0]
    c.execute("UPDATE meta SET value = ? WHERE key = 'head_seq'", (str(head),))
    c.execute("UPDATE meta SET value = ? WHERE key = 'head_hash'", (prev_hash,))
    c.execute(
        "UPDATE snapshots SET hash = (SELECT hash FROM journal j WHERE j.seq = snapshots.seq)"
    )


def test_a_passing_check_records_the_verified_head_and_never_writes_the_ledger(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    status, report = verify_json(capsys, "--db", str(db))
    assert status == 0 and report["mode"] == "full"
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    recorded = read_verified(db)
    assert (recorded.head.seq, recorded.head.hash) == head_of(db)
    assert recorded.mode == "full" and recorded.table_id == "t-h"
    assert recorded.balances == verify(db).balances and recorded.balances
    on_disk = json.loads(sidecar_path(db).read_text())
    assert on_disk["head_seq"] == report["head_seq"]
    assert on_disk["head_hash"] == report["head_hash"]
    assert on_disk["verified_at"].endswith("Z")
    assert not list(db.parent.glob("*.tmp"))  # written through a temporary file, renamed


def test_no_record_leaves_no_sidecar(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert verify_json(capsys, "--db", str(db), "--no-record")[0] == 0
    assert not sidecar_path(db).exists()


def test_since_verified_checks_only_the_new_rows(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert verify_json(capsys, "--db", str(db))[0] == 0
    mark, _ = head_of(db)
    grow(db)
    head, head_hash = head_of(db)
    status, report = verify_json(capsys, "--db", str(db), "--since-verified")
    assert status == 0, report["problems"]
    assert report["mode"] == "since-verified" and report["checked_from_seq"] == mark
    assert report["rows"] == head - mark
    assert (report["head_seq"], report["head_hash"]) == (head, head_hash)
    # It moved the recorded head on, with the balances (recorded + later postings) that
    # the full check sums from every posting.
    recorded = read_verified(db)
    assert recorded.head.seq == head and recorded.mode == "since-verified"
    assert recorded.balances == verify(db).balances and report["identity_gap_units"] == 0


def test_since_verified_catches_a_tail_edit(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert verify_json(capsys, "--db", str(db))[0] == 0
    mark, _ = head_of(db)
    grow(db)
    c = untriggered(db)
    seq = wager_rows(c, after=mark)[1]
    edit_wager(c, seq)
    c.close()
    status, report = verify_json(capsys, "--db", str(db), "--since-verified")
    assert status == 1 and report["first_bad_seq"] == seq
    assert read_verified(db).head.seq == mark  # a failed check records nothing


def test_since_verified_catches_a_tail_posting_and_balance_edit(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert verify_json(capsys, "--db", str(db))[0] == 0
    mark, _ = head_of(db)
    grow(db)
    c = untriggered(db)
    seq = wager_rows(c, after=mark)[0]
    c.execute("UPDATE postings SET units = units + 1 WHERE seq = ? AND leg = 0", (seq,))
    c.execute("UPDATE balances SET units = units + 1 WHERE account = 'wagers'")
    c.close()
    status, report = verify_json(capsys, "--db", str(db), "--since-verified")
    assert status == 1 and report["first_bad_seq"] == seq


def test_an_old_row_edit_is_caught_by_full_mode_only(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The documented limit of the quick mode: rows under the verified head are not read."""
    assert verify_json(capsys, "--db", str(db))[0] == 0
    grow(db)
    c = untriggered(db)
    seq = wager_rows(c)[2]
    edit_wager(c, seq)
    c.close()
    assert verify_json(capsys, "--db", str(db), "--since-verified", "--no-record")[0] == 0
    status, report = verify_json(capsys, "--db", str(db), "--full")
    assert status == 1 and report["first_bad_seq"] == seq
    assert "edited" in str(report["problems"])


def test_an_old_posting_edit_with_its_balance_is_caught_by_the_quick_mode_too(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The balances table is checked against the recorded balances, so a balance moved
    under the verified head no longer adds up."""
    assert verify_json(capsys, "--db", str(db))[0] == 0
    c = untriggered(db)
    c.execute("UPDATE balances SET units = units - 10000 WHERE account = 'meter:main'")
    c.close()
    status, report = verify_json(capsys, "--db", str(db), "--since-verified")
    assert status == 1
    assert "balance of meter:main" in str(report["problems"])


def test_a_consistent_rewrite_through_the_verified_head_is_caught_by_the_quick_mode(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert verify_json(capsys, "--db", str(db))[0] == 0
    mark, _ = head_of(db)
    grow(db)
    c = untriggered(db)
    seq = wager_rows(c)[2]
    edit_wager(c, seq)
    rehash_from(c, seq)
    c.close()
    status, report = verify_json(capsys, "--db", str(db), "--since-verified")
    assert status == 1 and report["first_bad_seq"] == mark
    assert "no longer has the recorded hash" in str(report["problems"])


def test_a_consistent_rewrite_is_caught_by_a_witnessed_head(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every later hash and meta recomputed and the sidecar dropped: the chain is intact,
    only a head recorded elsewhere (the MQTT status) shows the rewrite."""
    witness_seq, witness_hash = head_of(db)
    grow(db)
    c = untriggered(db)
    old = wager_rows(c)[2]
    data = c.execute("SELECT data FROM journal WHERE seq = ?", (old,)).fetchone()[0]
    # An edit that keeps the postings (so the SQL checks pass): a different time.
    c.execute("UPDATE journal SET at = ? WHERE seq = ?", ("2026-11-21T19:00:00.000001Z", old))
    assert c.execute("SELECT data FROM journal WHERE seq = ?", (old,)).fetchone()[0] == data
    rehash_from(c, old)
    c.close()
    assert verify_json(capsys, "--db", str(db), "--no-record")[0] == 0  # the chain alone: fine
    witness = f"{witness_seq}:{witness_hash}"
    status, report = verify_json(capsys, "--db", str(db), "--head", witness)
    assert status == 1 and report["first_bad_seq"] == witness_seq
    assert f"witnessed head {witness} does not match" in str(report["problems"])
    # The same with the quick mode, after a sidecar that matches the rewritten ledger.
    assert verify_json(capsys, "--db", str(db))[0] == 0
    status, report = verify_json(capsys, "--db", str(db), "--since-verified", "--head", witness)
    assert status == 1 and f"witnessed head {witness} does not match" in str(report["problems"])
    # The text output names the head too.
    capsys.readouterr()
    assert main(["ledger", "verify", "--db", str(db), "--head", witness]) == 1
    assert f"witnessed head {witness} does not match" in capsys.readouterr().out


def test_a_matching_witness_passes_and_the_quick_mode_walks_from_it(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    early_seq, early_hash = head_of(db)
    grow(db, rounds=3, run="a")
    assert verify_json(capsys, "--db", str(db))[0] == 0
    mark, _ = head_of(db)
    grow(db, rounds=3, run="b")
    head, _ = head_of(db)
    witness = f"{early_seq}:{early_hash}"
    status, report = verify_json(capsys, "--db", str(db), "--head", witness, "--no-record")
    assert status == 0, report["problems"]
    status, report = verify_json(capsys, "--db", str(db), "--since-verified", "--head", witness)
    assert status == 0, report["problems"]
    assert report["checked_from_seq"] == early_seq and report["rows"] == head - early_seq
    assert mark > early_seq


def test_a_witness_beyond_the_head_means_rows_were_cut_off(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seq, _ = head_of(db)
    witness = f"{seq + 5}:{'a' * 64}"
    status, report = verify_json(capsys, "--db", str(db), "--head", witness)
    assert status == 1
    assert f"the ledger has no row {seq + 5}" in str(report["problems"])


@pytest.mark.parametrize("bad", ["12", "x:" + "a" * 64, "0:" + "a" * 64, "5:abc"])
def test_a_malformed_head_is_a_usage_error(
    db: Path, bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["ledger", "verify", "--db", str(db), "--head", bad])
    assert exit_.value.code == 2
    assert "SEQ:HASH" in capsys.readouterr().err
    with pytest.raises(ValueError, match="is not SEQ:HASH"):
        parse_head(bad)


@pytest.mark.parametrize(
    "content", [None, "{not json", '{"format": 1, "head_seq": "x"}', '["format", 1]']
)
def test_a_missing_or_garbled_sidecar_falls_back_to_the_full_check(
    db: Path, content: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    if content is not None:
        sidecar_path(db).write_text(content)
    c = untriggered(db)
    seq = wager_rows(c)[2]
    edit_wager(c, seq)  # an old row: only the full check can see it
    c.close()
    capsys.readouterr()
    assert main(["ledger", "verify", "--db", str(db), "--since-verified"]) == 1
    captured = capsys.readouterr()
    assert f"FAILED at row {seq}" in captured.out
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(": checking in full")
    assert ("is missing" if content is None else "is garbled") in err[0]


def test_a_sidecar_of_another_table_is_refused(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert verify_json(capsys, "--db", str(db))[0] == 0
    data = json.loads(sidecar_path(db).read_text())
    data["table_id"] = "t-other"
    sidecar_path(db).write_text(json.dumps(data))
    status, report = verify_json(capsys, "--db", str(db), "--since-verified")
    assert status == 1 and "table 't-other'" in str(report["problems"])


def test_a_sidecar_that_cannot_be_written_is_one_line_and_keeps_the_result(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sidecar_path(db).mkdir()  # in the way (permissions would not stop root)
    capsys.readouterr()
    assert main(["ledger", "verify", "--db", str(db)]) == 0
    captured = capsys.readouterr()
    assert "OK" in captured.out
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "verified head was not recorded" in err[0]
    assert not list(db.parent.glob("*.tmp"))
