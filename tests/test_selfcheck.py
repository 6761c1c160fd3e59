"""The power-up self-check: software digest, configuration digest, ledger chain head."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from progressived.daemon.selfcheck import ledger_head, run_selfcheck, software_digest
from progressived.ledger import Ledger
from tests.daemon_harness import table
from tests.helpers import table as table_params


def make_ledger(path: Path) -> None:
    with Ledger.open(path, table_params(), at="2026-11-21T00:00:00Z") as ledger:
        for n in range(5):
            ledger.record("note", {"n": n}, at="2026-11-21T00:00:01Z")


def test_the_chain_head_is_recomputed_and_tampering_named(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    make_ledger(db)
    head, digest, checked = ledger_head(db)
    assert head == checked
    assert len(digest) == 64
    with sqlite3.connect(db) as conn:
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger'"
        ).fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute(
            "UPDATE journal SET data = json_set(data, '$.n', 99) WHERE seq = ?", (head - 1,)
        )
    with pytest.raises(ValueError, match=f"row {head - 1}: hash does not match"):
        ledger_head(db)
    result = run_selfcheck(
        ledger_path=db, config_path=None, paytable_path=None, expected_software=None
    )
    assert not result.ok
    assert "ledger chain" in result.problems[0]


def test_software_digest_is_stable_and_checked_against_the_approved_value(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    make_ledger(db)
    sha, crc, files = software_digest()
    assert software_digest() == (sha, crc, files)
    assert files > 20
    assert len(crc) == 4
    good = run_selfcheck(
        ledger_path=db, config_path=None, paytable_path=None, expected_software=sha
    )
    assert good.ok
    bad = run_selfcheck(
        ledger_path=db, config_path=None, paytable_path=None, expected_software="0" * 64
    )
    assert not bad.ok
    assert "not the approved" in bad.problems[0]


async def test_a_failed_self_check_keeps_the_progressive_closed(tmp_path: Path) -> None:
    async with table(tmp_path) as t:
        t.config.write_text(
            t.config.read_text() + f'\n[selfcheck]\nsoftware_sha256 = "{"0" * 64}"\n'
        )
        t.start_daemon()
        check = await t.sub.wait_event("self_check", timeout=30)
        assert check["ok"] is False
        assert "not the approved" in check["problems"][0]
        await t.online()
        await asyncio.sleep(0.3)
        assert t.sub.meters()[-1]["state"] == "closed"
        await t.bets(1)
        await t.press("LOCK")
        rejected = await t.sub.wait_event("command_rejected")
        assert "self-check failed" in rejected["reason"]
