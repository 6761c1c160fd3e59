"""What an auditor with only docs/ledger.md, sqlite3 and sha256sum finds.

Every recipe of docs/ledger.md runs against a real ledger (each must stay silent or give 0)
and against tampered copies (triggers dropped, as an attacker would): each tamper must be
caught by the recipe meant for it, by ``ledger verify`` without ``--deep`` where the brief
says so, and by recovery with a message that names the part at fault.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.stress import demo_params, drive
from progressived.ledger import Ledger, LedgerError
from progressived.ledger.verify import verify

ROOT = Path(__file__).resolve().parents[1]
AT = "2026-11-21T19:00:00.000000Z"
PARAMS = demo_params("t-audit")

pytestmark = pytest.mark.skipif(
    shutil.which("sqlite3") is None or shutil.which("sha256sum") is None,
    reason="needs the sqlite3 and sha256sum tools",
)


def recipes() -> dict[str, str]:
    """docs/ledger.md's shell recipes by their ``<!-- audit-NAME -->`` marker."""
    text = (ROOT / "docs" / "ledger.md").read_text()
    found = dict(re.findall(r"<!-- audit-([a-z-]+) -->\n```sh\n(.*?)```", text, re.S))
    # every shell block of the doc is a marked recipe, so none escapes these tests
    assert text.count("```sh\n") == len(found)
    return found


def run(name: str, db: Path) -> str:
    code = recipes()[name]
    result = subprocess.run(
        ["bash", "-c", code.replace("ledger.db", str(db))],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, (name, result.stderr)
    assert result.stderr == "", (name, result.stderr)
    return result.stdout


SILENT = ["head", "prev", "balanced", "postings", "balances", "snapshot-hash", "snapshot"]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("audit") / "ledger.db"
    with Ledger.open(path, PARAMS, at=AT, snapshot_every=100) as ledger:
        drive(ledger, PARAMS, rounds=40, seed=5, run="r", group=4)
        ledger.record("daemon_stopped", {"why": "test"}, at=AT)  # a system row at the end
        ledger.checkpoint()
    return path


@pytest.fixture
def db(pristine: Path, tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    shutil.copy(pristine, path)
    return path


@pytest.fixture
def conn(db: Path) -> Iterator[sqlite3.Connection]:
    """A connection of someone who dropped the triggers."""
    c = sqlite3.connect(db, isolation_level=None)
    for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        c.execute(f"DROP TRIGGER {name}")
    yield c
    c.close()


def gaps(db: Path) -> list[int]:
    lines = run("meter", db).strip().splitlines()
    assert lines[0].split("|")[-1] == "gap"
    return [int(line.split("|")[-1]) for line in lines[1:]]


def test_every_recipe_holds_on_a_sound_ledger(pristine: Path) -> None:
    assert len(recipes()) >= 14
    for name in SILENT:
        assert run(name, pristine) == "", name
    rows = pristine_rows(pristine)
    for name in ("chain", "chain-fast"):
        assert run(name, pristine) == f"checked {rows} rows\n", name
    assert run("identity", pristine) == "0\n"
    assert gaps(pristine) == [0, 0]
    assert "ledger_created" in run("parameters", pristine)
    assert run("count", pristine).startswith(f"{rows}|1|{rows}\n")


def pristine_rows(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return int(c.execute("SELECT count(*) FROM journal").fetchone()[0])


def test_fake_balanced_postings_on_a_system_row(db: Path, conn: sqlite3.Connection) -> None:
    seq = conn.execute("SELECT max(seq) FROM journal WHERE category = 'system'").fetchone()[0]
    conn.executemany(
        "INSERT INTO postings VALUES (?, ?, ?, ?)",
        [(seq, 0, "wagers", -500), (seq, 1, "meter:main", 500)],
    )
    conn.execute("UPDATE balances SET units = units - 500 WHERE account = 'wagers'")
    conn.execute("UPDATE balances SET units = units + 500 WHERE account = 'meter:main'")
    conn.close()
    assert run("balanced", db) == "" and run("balances", db) == ""  # the forgery balances
    assert run("postings", db).split() == [f"{seq}|0", f"{seq}|1"]
    assert verify(db, replay=False).first_bad_seq == seq


def test_postings_for_a_row_that_does_not_exist(db: Path, conn: sqlite3.Connection) -> None:
    head = conn.execute("SELECT max(seq) FROM journal").fetchone()[0]
    conn.executemany(
        "INSERT INTO postings VALUES (?, ?, ?, ?)",
        [(head + 5, 0, "wagers", -500), (head + 5, 1, "meter:main", 500)],
    )
    conn.close()
    assert run("postings", db).split() == [f"{head + 5}|0", f"{head + 5}|1"]


def test_meta_head_hash_differs(db: Path, conn: sqlite3.Connection) -> None:
    head, real = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC").fetchone()
    conn.execute("UPDATE meta SET value = ? WHERE key = 'head_hash'", ("f" * 64,))
    conn.close()
    out = run("head", db)
    assert out == f"meta head {head} {'f' * 64} but the journal ends at {head} {real}\n"
    message = str(verify(db, replay=False).problems[0])
    assert "head hash" in message and real in message
    assert f"head row {head} but the journal ends at row {head}" not in message


def test_meta_head_seq_behind(db: Path, conn: sqlite3.Connection) -> None:
    head = conn.execute("SELECT max(seq) FROM journal").fetchone()[0]
    conn.execute("UPDATE meta SET value = ? WHERE key = 'head_seq'", (str(head - 1),))
    conn.close()
    assert f"meta head {head - 1} " in run("head", db)


@pytest.mark.parametrize("account", ["meter:main", "seed_funding:main", "house_retained"])
def test_a_deleted_leg_breaks_the_per_meter_identity(
    db: Path, conn: sqlite3.Connection, account: str
) -> None:
    seq, leg = conn.execute(
        "SELECT seq, leg FROM postings WHERE account = ? ORDER BY seq DESC", (account,)
    ).fetchone()
    conn.execute("DELETE FROM postings WHERE seq = ? AND leg = ?", (seq, leg))
    conn.close()
    assert any(gaps(db)), run("meter", db)


def test_an_edited_row_is_found_by_the_fast_chain_recipe(
    db: Path, conn: sqlite3.Connection
) -> None:
    seq = conn.execute("SELECT seq FROM journal WHERE kind = 'wager_locked'").fetchone()[0]
    conn.execute("UPDATE journal SET actor = 'mallory' WHERE seq = ?", (seq,))
    conn.close()
    rows = pristine_rows(db)
    assert run("chain-fast", db) == f"BAD row {seq}\nchecked {rows} rows\n"
    assert run("chain", db) == f"BAD row {seq}\nchecked {rows} rows\n"


def forge_latest_snapshot(conn: sqlite3.Connection) -> int:
    seq, state = conn.execute("SELECT seq, state FROM snapshots ORDER BY seq DESC").fetchone()
    forged = re.sub(r'"meter:main":(\d+)', lambda m: f'"meter:main":{int(m[1]) + 7}', state)
    assert forged != state
    conn.execute("UPDATE snapshots SET state = ? WHERE seq = ?", (forged, seq))
    return int(seq)


def test_a_forged_latest_snapshot(db: Path, conn: sqlite3.Connection) -> None:
    seq = forge_latest_snapshot(conn)
    conn.close()
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        posted = c.execute(
            "SELECT sum(units) FROM postings WHERE account = 'meter:main' AND seq <= ?", (seq,)
        ).fetchone()[0]
    assert run("snapshot", db) == f"{seq}|meter:main|{posted + 7}|{posted}\n"
    fast = verify(db, replay=False)  # the default of `ledger verify`: no replay
    assert fast.first_bad_seq == seq
    assert "latest snapshot" in str(fast.problems[0])
    with pytest.raises(LedgerError) as caught:
        Ledger.open(db, PARAMS, at=AT)
    assert f"snapshot at row {seq}" in str(caught.value)
    assert "progressivectl ledger verify --deep" in str(caught.value)
    assert "balances table" not in str(caught.value)


def test_snapshots_cannot_be_deleted(db: Path) -> None:
    with sqlite3.connect(db) as c, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        c.execute("DELETE FROM snapshots")


def test_an_older_ledger_gets_the_snapshot_delete_trigger_when_opened(db: Path) -> None:
    c = sqlite3.connect(db, isolation_level=None)
    c.execute("DROP TRIGGER snapshots_no_delete")  # as made before the trigger existed
    c.close()
    Ledger.open(db, PARAMS, at=AT).close()
    with sqlite3.connect(db) as c, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        c.execute("DELETE FROM snapshots")


def test_the_snapshot_rule_in_the_doc_is_the_codes(db: Path) -> None:
    from progressived.ledger import snapshot
    from progressived.ledger.plan import ROUND_END, SNAPSHOT_AT_ROUND_END, SNAPSHOT_EVERY

    text = (ROOT / "docs" / "ledger.md").read_text()
    section = text[text.index("## Snapshots") : text.index("## Recovery")]
    rule = " ".join(section.split("`state` is JSON")[0].split())
    assert f"at least {SNAPSHOT_EVERY:,}".replace(",", "") in rule.replace(",", "")
    assert f"at least {SNAPSHOT_AT_ROUND_END} and" in rule
    assert all(f"`{kind}`" in rule for kind in ROUND_END)
    # the documented state keys are the snapshot's
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        state = c.execute("SELECT state FROM snapshots ORDER BY seq DESC").fetchone()[0]
    table = section.split("`state` is JSON")[1]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", table, re.M))
    assert set(json.loads(state)) <= documented
    # and every key the snapshot codec reads (two are written only on a linked table)
    assert documented == {*snapshot.KEYS, *snapshot.OPTIONAL_KEYS}
