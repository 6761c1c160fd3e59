"""The ledger's STRICT tables need SQLite 3.37: an older library is named in one line, exit 8,
before any ledger file is touched (``init``, ``run``, ``check-config``, ``self-check``,
``link``, ``link --check``, opening either kind of ledger).

The commands run as real processes whose ``sqlite3.sqlite_version`` (what the check reads:
the library Python is linked with) is set to an older release before the command starts.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from progressived.ledger import Ledger
from progressived.link.store.ledger import LinkLedger
from progressived.storage.sqlite_version import MINIMUM_SQLITE_TEXT, SQLiteTooOld, sqlite_too_old
from tests.helpers import table as table_params
from tests.link_sim import link_params
from tests.test_cli_faults import config, one_line
from tests.test_start_checks import init, link_config, listing

pytestmark = pytest.mark.e2e  # the daemon, the link controller and their checks as processes (pyproject.toml's markers)

OLD = "3.31.1"  # Ubuntu 20.04's SQLite: no STRICT tables


def old_sqlite(*argv: str, program: str = "daemon") -> subprocess.CompletedProcess[str]:
    """``progressived ARGV`` (or ``progressivectl``) in a process whose SQLite says it is OLD."""
    code = (
        "import sqlite3, sys\n"
        f"sqlite3.sqlite_version = {OLD!r}\n"
        f"from progressived.cli.{program} import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60
    )


def refusal(result: subprocess.CompletedProcess[str]) -> str:
    """The one error line (``check-config`` also lists its warnings, e.g. no control group)."""
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if ": warning: " not in line]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_the_minimum_is_3_37_and_this_machine_meets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MINIMUM_SQLITE_TEXT == "3.37.0"
    assert sqlite_too_old() is None, sqlite3.sqlite_version
    for good in ("3.37.0", "3.40.1", "3.45.3", "4.0.0"):
        monkeypatch.setattr(sqlite3, "sqlite_version", good)
        assert sqlite_too_old() is None, good
    for bad in ("3.36.0", "3.31.1", "3.7.17", "2.8.17"):
        monkeypatch.setattr(sqlite3, "sqlite_version", bad)
        why = sqlite_too_old()
        assert why is not None and f"SQLite library is {bad}" in why
        assert "STRICT tables need SQLite 3.37.0 or later" in why


def test_opening_either_ledger_refuses_an_old_sqlite_and_touches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = "2026-11-23T12:00:00.000000Z"
    table_db, link_db = tmp_path / "table.db", tmp_path / "link.db"
    with Ledger.create(table_db, table_params(), at=at, created_by={"operator": "ops-7"}):
        pass
    before = listing(tmp_path)
    monkeypatch.setattr(sqlite3, "sqlite_version", OLD)
    with pytest.raises(SQLiteTooOld, match=f"SQLite library is {OLD}"):
        Ledger.open(table_db, table_params(), at=at, create=False)
    with pytest.raises(SQLiteTooOld):
        Ledger.create(tmp_path / "new.db", table_params(), at=at, created_by={})
    params = link_params()
    with pytest.raises(SQLiteTooOld):
        LinkLedger.create(link_db, params, at=at, software="test")
    assert listing(tmp_path) == before  # no new file, the ledger untouched


def test_check_config_init_run_and_self_check_say_it_in_one_line_exit_8(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    made = old_sqlite("init", "--config", str(config(fresh)))
    assert made.returncode == 8, made.stderr
    assert f"SQLite library is {OLD}" in one_line(made)
    assert listing(fresh) == [("t-1.toml", *listing(fresh)[0][1:])]  # no ledger made
    init(cfg)
    before = listing(tmp_path)
    for argv in (
        ("check-config", str(cfg)),
        ("run", "--config", str(cfg)),
        ("self-check", "--config", str(cfg)),
    ):
        result = old_sqlite(*argv)
        assert result.returncode == 8, (argv, result.stderr)
        line = refusal(result)
        assert f"{cfg}: sqlite: this system's SQLite library is {OLD}" in line, line
        assert "need SQLite 3.37.0 or later" in line
    assert listing(tmp_path) == before


def test_the_link_controller_and_its_check_say_it_in_one_line_exit_8(tmp_path: Path) -> None:
    cfg = link_config(tmp_path)
    init(cfg)
    before = listing(tmp_path)
    for argv in (
        ("check-config", str(cfg)),
        ("link", "--config", str(cfg), "--check"),
        ("link", "--config", str(cfg)),
    ):
        result = old_sqlite(*argv)
        assert result.returncode == 8, (argv, result.stderr)
        assert f"{cfg}: sqlite: this system's SQLite library is {OLD}" in refusal(result)
    assert listing(tmp_path) == before
