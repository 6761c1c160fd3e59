"""The same tampering, found by the fast verify (``replay=False``, the CLI's default).

The fast pass recomputes the hash chain and checks the rows' postings, the balances and
the identity in SQL, without rebuilding the engine state; only a forged snapshot needs the
deep replay (``--deep``), and the ledger's own recovery refuses one too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tests.test_ledger_verify as deep
from progressived.ledger.verify import VerifyReport, verify
from tests.test_ledger_verify import (  # noqa: F401 - fixtures and tests collected here too
    conn,
    db,
    pristine,
    test_appended_row_with_a_made_up_hash,
    test_deleted_last_rows,
    test_deleted_row,
    test_edited_amount_in_the_row,
    test_edited_balance_only,
    test_edited_posting_and_balance,
    test_inserted_row_in_the_middle,
    test_pristine_ledger_verifies,
    test_swapped_rows,
)


def fast_verify(path: Path | str, **kwargs: Any) -> VerifyReport:
    return verify(path, replay=False, **kwargs)


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deep, "verify", fast_verify)


def test_fast_verify_finds_postings_that_do_not_balance(db: Path) -> None:  # noqa: F811
    import sqlite3

    c = sqlite3.connect(db, isolation_level=None)
    for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        c.execute(f"DROP TRIGGER {name}")
    seq = deep.money_row(c)
    c.execute("UPDATE postings SET account = 'house_retained' WHERE seq = ? AND leg = 1", (seq,))
    c.close()
    report = fast_verify(db)
    assert report.first_bad_seq == seq
    assert "postings table differs" in str(report.problems[0])
