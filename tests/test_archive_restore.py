"""``progressivectl ledger restore``: a dead board's ledger made again from the archive,
rows and chain exactly the archived ones, continued by the ledger, and what may be missing
after the archived head reported from the table's retained status (docs/archive.md,
"Restoring a table")."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from paho.mqtt import publish

from bench.stress import demo_params, drive
from progressived.archive.core.chain import Head
from progressived.archive.store.database import ArchiveStore, TableWrite
from progressived.cli import ctl
from progressived.ledger import Ledger
from progressived.ledger.verify import verify
from progressived.link.core.messages import encode
from progressived.testing.broker import Mosquitto
from tests.archive_helpers import AT, TABLE, rows_of, table_ledger
from tests.link_rig import Rig

COLUMNS = "seq, at, table_id, round, seat, kind, category, actor, idem_key, data, prev_hash, hash"


def archive(url: str, path: Path, upto: int | None = None, table: str = TABLE) -> Head:
    """The archive holding the ledger's rows (up to row ``upto``)."""
    rows = [r for r in rows_of(path) if upto is None or r.seq <= upto]
    store = ArchiveStore.open_archive(url, "new", "archive-t", "now")
    try:
        lease = store.acquire("a1", 30.0)
        head = Head(rows[-1].seq, rows[-1].hash)
        store.store([TableWrite(table, tuple(rows), head)], [], lease)
    finally:
        store.close()
    return head


def journal(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT {COLUMNS} FROM journal ORDER BY seq").fetchall()


def restore(*args: str) -> int:
    return ctl.main(["ledger", "restore", *args])


def test_a_restored_ledger_is_the_archived_one_and_goes_on(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    original = table_ledger(tmp_path / "board.db", rounds=30)
    head = archive(postgres_url, original)
    out = tmp_path / "restored.db"
    assert restore("--from", postgres_url, "--table", TABLE, "--out", str(out), "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["head_seq"], report["head_hash"]) == (head.seq, head.hash)
    assert report["verify_ok"] and report["may_be_missing"] == []
    assert journal(out) == journal(original)  # every row, byte for byte
    checked = verify(out)
    assert checked.ok, checked.problems
    assert (checked.head_seq, checked.head_hash) == (head.seq, head.hash)
    assert checked.balances == verify(original).balances
    # The daemon opens it as its own (create=False, as `progressived run`) and goes on.
    params = demo_params(TABLE)
    with Ledger.open(original, params, at=AT, create=False) as board:
        state = board.state
    with Ledger.open(out, params, at=AT, create=False) as ledger:
        assert ledger.recovery.snapshot_seq == head.seq  # recovery starts at the head
        assert ledger.state == state
        drive(ledger, params, rounds=3, seed=9, run="after")
        assert ledger.head_seq > head.seq
    assert verify(out).ok
    # A file already there is never overwritten; a table the archive does not hold.
    assert restore("--from", postgres_url, "--table", TABLE, "--out", str(out)) == 6
    assert restore("--from", postgres_url, "--table", "nobody", "--out", str(tmp_path / "n.db")) == 3
    assert not (tmp_path / "n.db").exists()
    assert "restore" in capsys.readouterr().err


def test_rows_after_the_archived_head_are_reported_missing(
    tmp_path: Path, postgres_url: str, mosquitto: Mosquitto, capsys: pytest.CaptureFixture[str]
) -> None:
    original = table_ledger(tmp_path / "board.db", rounds=6)
    rows = rows_of(original)
    head = archive(postgres_url, original, upto=rows[-8].seq)
    # The dead board's last retained status witnessed its real head.
    status = {"table": TABLE, "status": "offline", "head_seq": rows[-1].seq,
              "head_hash": rows[-1].hash}
    publish.single(f"progressive/table/{TABLE}/status", json.dumps(status), qos=1,
                   retain=True, hostname=mosquitto.host, port=mosquitto.port)
    out = tmp_path / "restored.db"
    status_code = restore(
        "--from", postgres_url, "--table", TABLE, "--out", str(out),
        "--broker", f"{mosquitto.host}:{mosquitto.port}",
    )
    text = capsys.readouterr().out
    assert status_code == 1
    assert f"head {head.seq}:{head.hash}" in text
    assert f"MAY BE MISSING: rows after {head.seq}" in text and str(rows[-1].seq) in text
    assert verify(out).ok


def test_a_linked_table_gets_its_unanswered_messages_back_and_the_links_witness(
    tmp_path: Path, postgres_url: str, postgres_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    rig = Rig(tmp_path)
    try:
        rig.play()
        site = rig.sites["t1"]
        unanswered = site.contribute(2)
        rig.deliver([unanswered], answer=False)  # applied at the link, its answer lost
    finally:
        rig.close()
    witnessed = unanswered.head.seq  # the table's head the link journaled with it
    archive(postgres_url, site.path, table="t1")
    out = tmp_path / "restored.db"
    args = ["--table", "t1", "--out", str(out), "--link-db", str(rig.link_path), "--json"]
    assert restore("--from", postgres_url, *args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["link_outbox"] == 1 and report["may_be_missing"] == []
    assert report["link_witness"]["message_seq"] == unanswered.seq
    with sqlite3.connect(out) as conn:
        kept = conn.execute("SELECT seq, id, topic, payload FROM link_outbox").fetchall()
    topic = f"progressive/link/{rig.params.link_id}/from/t1"
    assert kept == [(unanswered.seq, unanswered.id, topic, encode(unanswered).decode())]
    assert verify(out).ok
    # An archive that stopped before the rows the link witnessed: they may be missing.
    behind = postgres_server.database()
    archive(behind, site.path, upto=witnessed - 1, table="t1")
    out2 = tmp_path / "behind.db"
    args2 = ["--table", "t1", "--out", str(out2), "--link-db", str(rig.link_path), "--json"]
    assert restore("--from", behind, *args2) == 1
    missing = json.loads(capsys.readouterr().out)["may_be_missing"]
    assert any(f"witnessed the table's row {witnessed}" in m for m in missing)
    assert any(f"applied the table's message {unanswered.seq}" in m for m in missing)
