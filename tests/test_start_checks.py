"""`check-config` answers with the status `run` (or `link`) would exit with, and neither
creates a file when it refuses: the same checks of the ledger (there, a progressived ledger,
of the right kind and owner, openable for writing by the user), run by real processes on
real files, with the directory listed before and after.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from progressived.testing.config import render_toml
from tests.conftest import ROOT
from tests.test_cli_faults import DAEMON, config, one_line, run

pytestmark = pytest.mark.e2e  # the daemon and the link controller started as processes (pyproject.toml's markers)

Listing = list[tuple[str, int, int]]


def listing(folder: Path) -> Listing:
    """Every file under ``folder`` with its size and modification time."""
    return sorted(
        (str(p.relative_to(folder)), p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in folder.rglob("*")
    )


def link_config(tmp: Path, *, link: str = "link-a", ledger: Path | None = None) -> Path:
    path = tmp / f"{link}.toml"
    path.write_text(
        render_toml(
            {
                "link": {
                    "id": link,
                    "tables": "@TABLES@",
                    "paytables": ROOT / "config" / "paytables",
                },
                "link.meters": [{"id": "pmg", "paytable": "pmg-01", "rate": 0.03}],
                "mqtt": {"port": 1},
                "ledger": {"path": ledger or tmp / "ledger.db"},
                "metrics": {"enabled": False},
                "control": {"socket": tmp / "link.sock"},
            }
        ).replace('"@TABLES@"', '["t-1", "t-2"]')
    )
    return path


def init(cfg: Path) -> None:
    made = run(*DAEMON, "init", "--config", str(cfg))
    assert made.returncode == 0, made.stderr


@contextlib.contextmanager
def unwritable(path: Path) -> Iterator[None]:
    """``path`` as a file the user running the commands may read but not write: for root
    the immutable attribute (root ignores modes), for anyone else mode 0444."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        yield
        return
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    assert made.returncode == 0, f"chattr +i (needs ext4 and CAP_LINUX_IMMUTABLE): {made.stderr}"
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def _missing(tmp: Path) -> None:
    pass


def _empty(tmp: Path) -> None:
    (tmp / "ledger.db").touch()


def _random_bytes(tmp: Path) -> None:
    (tmp / "ledger.db").write_bytes(os.urandom(16384))


def _another_programs_database(tmp: Path) -> None:
    with contextlib.closing(sqlite3.connect(tmp / "ledger.db")) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")


def _another_tables_ledger(tmp: Path) -> None:
    init(config(tmp / "elsewhere", table="t-9", ledger=tmp / "ledger.db"))


def _a_links_ledger(tmp: Path) -> None:
    init(link_config(tmp / "elsewhere", ledger=tmp / "ledger.db"))


def _a_newer_schema(tmp: Path) -> None:
    init(config(tmp / "elsewhere", ledger=tmp / "ledger.db"))
    with contextlib.closing(sqlite3.connect(tmp / "ledger.db")) as conn:
        conn.execute("PRAGMA user_version = 99")


TABLE_CASES: dict[str, tuple[Callable[[Path], None], int, str]] = {
    "no ledger": (_missing, 3, "no ledger at"),
    "an empty file": (_empty, 3, "never initialised"),
    "random bytes": (_random_bytes, 4, "is not a progressived ledger"),
    "another program's database": (_another_programs_database, 4, "not a progressived ledger"),
    "another table's ledger": (_another_tables_ledger, 4, "belongs to table 't-9', not 't-1'"),
    "a link's ledger": (_a_links_ledger, 4, "is the ledger of link 'link-a', not of table 't-1'"),
    "a newer schema": (_a_newer_schema, 4, "newer than this software"),
}


@pytest.mark.parametrize("case", list(TABLE_CASES))
def test_check_config_and_run_refuse_alike_and_create_nothing(tmp_path: Path, case: str) -> None:
    (tmp_path / "elsewhere").mkdir()
    make, status, reason = TABLE_CASES[case]
    make(tmp_path)
    shutil.rmtree(tmp_path / "elsewhere")
    cfg = config(tmp_path)
    before = listing(tmp_path)

    checked = run(*DAEMON, "check-config", str(cfg))
    assert checked.returncode == status, checked.stderr
    assert reason in checked.stderr and "Traceback" not in checked.stderr
    assert listing(tmp_path) == before

    started = run(*DAEMON, "run", "--config", str(cfg))
    assert started.returncode == status
    assert reason in one_line(started)
    assert listing(tmp_path) == before  # no .lock, no -wal/-shm, no socket, no empty ledger


def test_a_ledger_the_user_may_not_write_is_refused_alike_with_5(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    init(cfg)
    (tmp_path / "ledger.db.lock").unlink()  # as a restored backup: run would make it
    with unwritable(tmp_path / "ledger.db"):
        before = listing(tmp_path)
        checked = run(*DAEMON, "check-config", str(cfg))
        assert checked.returncode == 5, checked.stderr
        assert f"may not write {tmp_path / 'ledger.db'}" in checked.stderr
        started = run(*DAEMON, "run", "--config", str(cfg))
        assert started.returncode == 5
        assert f"may not write {tmp_path / 'ledger.db'}" in one_line(started)
        assert listing(tmp_path) == before


def test_checking_a_good_ledger_creates_nothing(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    init(cfg)
    (tmp_path / "ledger.db.lock").unlink()
    before = listing(tmp_path)
    checked = run(*DAEMON, "check-config", str(cfg))
    assert checked.returncode == 0, checked.stderr
    assert run(*DAEMON, "self-check", "--config", str(cfg)).returncode == 0
    assert listing(tmp_path) == before


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory other users can reach (pytest's own is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="progressived-user-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_check_config_as_the_daemons_user(open_dir: Path) -> None:
    """`--user NAME` (root): the ledger root made is refused for that user, with why; once
    the user owns the directory, it passes."""
    assert os.geteuid() == 0, "the tests run as root (.ci/test), as in CI"
    cfg = config(open_dir)
    init(cfg)
    refused = run(*DAEMON, "check-config", "--user", "nobody", str(cfg))
    assert refused.returncode == 5, refused.stderr
    ledger = open_dir / "ledger.db"
    # a new ledger is 0640: another user may not even read it
    assert f"user nobody may not read {ledger} (root:root 0640)" in refused.stderr
    assert f"user nobody may not write {ledger}.lock" in refused.stderr
    assert f"user nobody may not create files in {open_dir}" in refused.stderr
    # The same check as root itself passes: root may write anything.
    assert run(*DAEMON, "check-config", str(cfg)).returncode == 0

    for path in (open_dir, *open_dir.iterdir()):
        os.chown(path, 65534, 65534)
    before = listing(open_dir)
    passed = run(*DAEMON, "check-config", "--user", "nobody", str(cfg))
    assert passed.returncode == 0, passed.stderr
    assert listing(open_dir) == before

    unknown = run(*DAEMON, "check-config", "--user", "no-such-user-xyz", str(cfg))
    assert unknown.returncode == 2
    assert "no user 'no-such-user-xyz' on this machine" in one_line(unknown)


LINK_CASES: dict[str, tuple[Callable[[Path], None], int, str]] = {
    "no ledger": (_missing, 3, "no link ledger at"),
    "random bytes": (_random_bytes, 4, "is not a progressived ledger"),
    "a table's ledger": (
        lambda tmp: init(config(tmp / "elsewhere", ledger=tmp / "ledger.db")),
        4,
        "is the ledger of table 't-1', not of link 'link-a'",
    ),
    "another link's ledger": (
        lambda tmp: init(link_config(tmp / "elsewhere", link="link-b", ledger=tmp / "ledger.db")),
        4,
        "belongs to link 'link-b', not 'link-a'",
    ),
}


@pytest.mark.parametrize("case", list(LINK_CASES))
def test_a_links_check_config_check_and_run_refuse_alike(tmp_path: Path, case: str) -> None:
    (tmp_path / "elsewhere").mkdir()
    make, status, reason = LINK_CASES[case]
    make(tmp_path)
    shutil.rmtree(tmp_path / "elsewhere")
    cfg = link_config(tmp_path)
    before = listing(tmp_path)
    for command in (
        ("check-config", str(cfg)),
        ("link", "--config", str(cfg), "--check"),
        ("link", "--config", str(cfg)),
    ):
        result = run(*DAEMON, *command)
        assert result.returncode == status, (command, result.stderr)
        assert reason in result.stderr and "Traceback" not in result.stderr, command
        assert listing(tmp_path) == before, command


def test_link_check_replays_the_ledger_and_writes_nothing(tmp_path: Path) -> None:
    cfg = link_config(tmp_path)
    init(cfg)
    (tmp_path / "ledger.db.lock").unlink()  # as a restored backup
    before = listing(tmp_path)
    checked = run(*DAEMON, "link", "--config", str(cfg), "--check")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == f"{cfg}: ok (link link-a, ledger head 2)"
    assert run(*DAEMON, "check-config", str(cfg)).returncode == 0
    assert listing(tmp_path) == before
