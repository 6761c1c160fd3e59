"""The operator commands: verify, export, meters, hits, simulate --ledger, and the audit
recipes of docs/ledger.md run with the sqlite3 tool."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest

from bench.stress import demo_params, drive
from progressived.cli.ctl import main
from progressived.engine import Confirm, KeyHand, Lock, Reconcile, Sensors, decide
from progressived.engine.commands import Command
from progressived.ledger import Ledger, chain
from progressived.link.store.ledger import LinkLedger
from progressived.storage.location import shown
from tests.link_sim import link_params

ROOT = Path(__file__).resolve().parent.parent
AT = "2026-11-21T19:00:00.000000Z"
PARAMS = demo_params("t-c")


def play(ledger: Ledger, *commands: Command) -> None:
    state = ledger.state
    for command in commands:
        decision = decide(PARAMS, state, command)
        assert decision.accepted
        state = decision.state
        ledger.append(decision.events, state, at=AT, actor=command.actor)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "ledger.db"
    with Ledger.open(path, PARAMS, at=AT) as ledger:
        drive(ledger, PARAMS, rounds=6, seed=21, run="r")
        play(
            ledger,
            Sensors(present=frozenset({3, 5}), at=AT),
            Lock(at=AT),
            KeyHand(seat=5, hand="akq-spades", at=AT),
            Confirm(at=AT, actor="sup-ann"),
            Reconcile(at=AT),
        )
    return path


@pytest.fixture
def db(pristine: Path, tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    shutil.copy(pristine, path)
    return path


def test_verify_ok(pristine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "verify", "--db", str(pristine)]) == 0
    assert "OK" in capsys.readouterr().out


def test_verify_names_the_first_bad_row(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER journal_no_update")
    seq = conn.execute("SELECT min(seq) FROM journal WHERE kind = 'wager_locked'").fetchone()[0]
    conn.execute(
        "UPDATE journal SET data = replace(data, '1000000', '1000001') WHERE seq = ?", (seq,)
    )
    conn.close()
    assert main(["ledger", "verify", "--db", str(db)]) == 1
    assert f"FAILED at row {seq}:" in capsys.readouterr().out
    assert main(["ledger", "verify", "--db", str(db), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["first_bad_seq"] == seq


def test_verify_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "verify", "--db", str(tmp_path / "none.db")]) == 2
    assert "no such ledger" in capsys.readouterr().err


def test_export_csv_reproduces_the_hashes(
    pristine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ledger", "export", "--db", str(pristine), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows[0]["seq"] == "1"
    prev = chain.GENESIS
    for row in rows:
        text = chain.content(
            int(row["seq"]),
            row["at"],
            row["table_id"],
            int(row["round"]) if row["round"] else None,
            int(row["seat"]),
            row["kind"],
            row["category"],
            row["actor"],
            row["idem_key"] or None,
            row["data"],
        )
        assert row["prev_hash"] == prev
        prev = chain.link(prev, text)
        assert row["hash"] == prev


def test_export_json_since(pristine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["ledger", "export", "--db", str(pristine), "--format", "json", "--since", "5"]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["seq"] == 6
    assert isinstance(rows[0]["data"], dict)
    head = sqlite3.connect(pristine).execute("SELECT max(seq) FROM journal").fetchone()[0]
    assert rows[-1]["seq"] == head
    assert (
        main(["ledger", "export", "--db", str(pristine), "--format", "json", "--since", str(head)])
        == 0
    )
    assert json.loads(capsys.readouterr().out) == []


def test_meters(pristine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["meters", "--db", str(pristine), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    conn = sqlite3.connect(pristine)
    locked = conn.execute("SELECT count(*) FROM journal WHERE kind = 'wager_locked'").fetchone()[0]
    refunded = conn.execute(
        "SELECT count(*) FROM journal WHERE kind = 'wager_refunded'"
    ).fetchone()[0]
    balances = dict(conn.execute("SELECT account, units FROM balances"))
    assert report["progressive_in"] == locked - refunded
    assert report["meters"]["main"]["units"] == balances["meter:main"]
    assert report["identity_gap_units"] == 0
    assert report["paid_attendant_units"] == balances["paid_attendant:main"]
    assert report["paid_total_units"] == (
        balances["paid_attendant:main"]
        + balances.get("paid_tray", 0)
        + balances.get("paid_envy", 0)
    )
    spades = [h for h in report["hands"] if h["hand"] == "akq-spades" and h["source"] == "meter"]
    assert spades
    assert spades[0]["hits"] >= 1
    head_hash = conn.execute("SELECT hash FROM journal WHERE seq = ?", (report["head_seq"],))
    assert report["head_hash"] == head_hash.fetchone()[0]
    assert main(["meters", "--db", str(pristine)]) == 0
    text = capsys.readouterr().out
    assert "progressive in:" in text
    # The daily report prints the head, for `ledger verify --head SEQ:HASH` later on.
    assert f"head {report['head_seq']}:{report['head_hash']}" in text.splitlines()
    assert main(["ledger", "verify", "--db", str(pristine), "--head",
                 f"{report['head_seq']}:{report['head_hash']}"]) == 0


def test_hits(pristine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hits", "--db", str(pristine), "--last", "1", "--json"]) == 0
    (hit,) = json.loads(capsys.readouterr().out)
    assert (hit["seat"], hit["hand"], hit["confirmed_by"]) == (5, "akq-spades", "sup-ann")
    assert hit["units"] == hit["meter_before_units"] - hit["meter_before_units"] % 10_000
    assert hit["meter_after_units"] is not None
    assert main(["hits", "--db", str(pristine)]) == 0
    assert "sup-ann" in capsys.readouterr().out


def test_simulate_records_in_a_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.txt"
    script.write_text("bet 1\nbet 2\nlock\nkey 2 akq-spades\nkey 9 flush\nconfirm\nreconcile\n")
    db = tmp_path / "sim.db"
    argv = [
        "simulate",
        "--paytable",
        "tcp-sd-1",
        "--table",
        "sim-1",
        "--meter-rate",
        "0.15",
        "--script",
        str(script),
        "--ledger",
        str(db),
        "--json",
    ]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(argv) == 0  # a second run continues from the ledger's state
    second = json.loads(capsys.readouterr().out)
    assert first["rejected"][0]["line"] == 5
    assert second["rounds"][0]["round"] == 2
    kinds = [k for (k,) in sqlite3.connect(db).execute("SELECT kind FROM journal ORDER BY seq")]
    assert kinds[:3] == ["ledger_created", "meter_opened", "start"]
    assert kinds.count("command_rejected") == 2
    assert kinds.count("award_confirmed") == 2
    assert kinds[-1] == "stop"
    assert main(["ledger", "verify", "--db", str(db)]) == 0
    with Ledger.open(db, demo_params("sim-1"), at=AT) as ledger:
        meter = ledger.state.balance("meter:main")
    assert meter == second["meters"]["main"]["units"]


def test_readers_do_not_block_the_writer(db: Path) -> None:
    with Ledger.open(db, PARAMS, at=AT) as ledger:
        reader = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
        reader.execute("BEGIN")
        before = reader.execute("SELECT count(*) FROM journal").fetchone()[0]
        drive(ledger, PARAMS, rounds=2, seed=1, run="w")  # writes while a reader is open
        assert reader.execute("SELECT count(*) FROM journal").fetchone()[0] == before
        assert main(["ledger", "verify", "--db", str(db)]) == 0  # while the writer is open
        reader.close()


def _doc_blocks() -> list[tuple[str, str]]:
    text = (ROOT / "docs" / "ledger.md").read_text()
    return [
        (m.group(1), m.group(2))
        for m in re.finditer(r"([^\n]*)\n\n(?:<!-- audit-[a-z-]+ -->\n)?```sh\n(.*?)```", text, re.S)
    ]


needs_cli = pytest.mark.skipif(
    shutil.which("sqlite3") is None or shutil.which("sha256sum") is None,
    reason="needs the sqlite3 and sha256sum tools",
)


@needs_cli
def test_documented_audit_recipes(db: Path) -> None:
    blocks = _doc_blocks()
    assert len(blocks) >= 7
    for intro, code in blocks:
        result = subprocess.run(
            ["bash", "-c", code.replace("ledger.db", str(db))],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert result.returncode == 0, (code, result.stderr)
        if "prints nothing" in intro:
            assert result.stdout == "", (code, result.stdout)
        if "Recompute every row's hash" in intro:
            assert "BAD" not in result.stdout
            assert re.search(r"checked \d+ rows", result.stdout)


@needs_cli
def test_documented_chain_recipe_finds_an_edit(db: Path) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER journal_no_update")
    conn.execute("UPDATE journal SET actor = 'mallory' WHERE seq = 7")
    conn.close()
    (code,) = [c for intro, c in _doc_blocks() if "Recompute every row's hash" in intro]
    result = subprocess.run(
        ["bash", "-c", code.replace("ledger.db", str(db))],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert "BAD row 7\n" in result.stdout


def test_a_database_url_is_shown_without_its_password_in_either_form(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``user:pw@`` and libpq's ``?password=`` (and ``sslpassword``) alike: ``***``."""
    assert shown("postgresql://ops:hunter2@db:5432/link") == "postgresql://ops:***@db:5432/link"
    assert (
        shown("postgresql://ops@db/link?sslmode=require&password=hunter2&sslpassword=k3y")
        == "postgresql://ops@db/link?sslmode=require&password=***&sslpassword=***"
    )
    assert shown("postgres://db/link?PassWord=hunter2") == "postgres://db/link?PassWord=***"
    assert shown("postgresql://ops@db/link?sslmode=require") == (
        "postgresql://ops@db/link?sslmode=require"
    )
    # What the commands print for an unreachable database (one line, exit 2).
    url = "postgresql://ops@127.0.0.1:1/link?connect_timeout=2&password=hunter2"
    for argv in (
        ["ledger", "verify", "--db", url],
        ["link", "reconcile", "--link-db", url, "--table-db", "/nonexistent.db"],
    ):
        assert main(argv) == 2
        said = capsys.readouterr()
        assert "hunter2" not in said.out + said.err
        assert "?connect_timeout=2&password=***: cannot read" in said.err, said.err


@pytest.mark.parametrize("kind", ["table", "link"])
def test_a_new_ledger_and_its_wal_shm_and_lock_files_are_0640_whatever_the_umask(
    kind: str, tmp_path: Path
) -> None:
    """Not SQLite's 0644 under a login's umask 022 (by hand, ``runuser``, ``sudo``)."""
    path = tmp_path / f"{kind}.db"
    old = os.umask(0o022)
    try:
        if kind == "table":
            ledger = Ledger.create(path, PARAMS, at=AT, created_by={"operator": "ops-7"})
        else:
            LinkLedger.create(path, link_params(), at=AT, software="test")
            ledger = LinkLedger.open(path, link_params(), at=AT)
        try:
            files = [path.with_name(path.name + end) for end in ("", "-wal", "-shm", ".lock")]
            modes = {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in files}
        finally:
            ledger.close()
    finally:
        os.umask(old)
    assert modes == {f.name: "0o640" for f in files}
