"""The power-up self-check: software digest, configuration digest, ledger chain head."""

from __future__ import annotations

import asyncio
import binascii
import hashlib
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from progressived.daemon.selfcheck import dependencies, run_selfcheck, software_digest
from progressived.ledger import Ledger
from progressived.ledger.tail import ledger_head
from tests.conftest import ROOT
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


@pytest.mark.e2e
def test_the_dependencies_are_the_installed_core_libraries_not_the_extras() -> None:
    found = dependencies()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for text in project["dependencies"]:
        name = canonicalize_name(Requirement(text).name)
        assert found[name] == metadata.version(name), name
    # What they pull in is there too (aiomqtt -> paho-mqtt, pydantic -> pydantic-core).
    assert found["paho-mqtt"] == metadata.version("paho-mqtt")
    assert found["pydantic-core"] == metadata.version("pydantic-core")
    # The extras are not the daemon's: installed here for the tests, but not listed.
    for extra in ("aiohttp", "amqtt", "pytest", "mypy"):
        metadata.version(extra)  # installed
        assert extra not in found
    assert list(found) == sorted(found)


def _in_a_process(
    pythonpath: Path | None, db: Path, approved: str
) -> tuple[str, dict[str, str], bool, list[str]]:
    """(software digest, dependencies, self-check ok, its problems) in a fresh process."""
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from progressived.daemon.selfcheck import dependencies, run_selfcheck, software_digest\n"
        "r = run_selfcheck(ledger_path=Path(sys.argv[1]), config_path=None, paytable_path=None,\n"
        "                  expected_software=sys.argv[2])\n"
        "print(json.dumps([software_digest()[0], dependencies(), r.ok, r.problems]))\n"
    )
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    done = subprocess.run(
        [sys.executable, "-c", code, str(db), approved],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    sha, deps, ok, problems = json.loads(done.stdout)
    return str(sha), dict(deps), bool(ok), list(problems)


@pytest.mark.e2e
def test_a_changed_library_changes_the_software_digest(tmp_path: Path) -> None:
    """Another release of one library (its installed metadata found first on the path, as
    an upgrade in the virtualenv would be) changes the digest the site approved."""
    db = tmp_path / "ledger.db"
    make_ledger(db)
    approved = software_digest()[0]
    sha, deps, ok, _ = _in_a_process(None, db, approved)
    assert (sha, ok) == (approved, True)
    assert deps["structlog"] == metadata.version("structlog")
    upgraded = tmp_path / "site"
    (upgraded / "structlog-99.0.dist-info").mkdir(parents=True)
    (upgraded / "structlog-99.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: structlog\nVersion: 99.0\n"
    )
    sha, deps, ok, problems = _in_a_process(upgraded, db, approved)
    assert deps["structlog"] == "99.0"
    assert sha != approved
    assert not ok and "is not the approved" in problems[0]


@pytest.mark.e2e
async def test_a_failed_self_check_keeps_the_progressive_closed(tmp_path: Path) -> None:
    async with table(tmp_path) as t:
        t.config.write_text(
            t.config.read_text() + f'\n[selfcheck]\nsoftware_sha256 = "{"0" * 64}"\n'
        )
        t.start_daemon()
        check = await t.sub.wait_event("self_check", timeout=30)
        assert check["ok"] is False
        assert "not the approved" in check["problems"][0]
        # Journaled and published with the libraries it covered.
        assert check["dependencies"]["aiomqtt"] == metadata.version("aiomqtt")
        await t.online()
        await asyncio.sleep(0.3)
        assert t.sub.meters()[-1]["state"] == "closed"
        await t.bets(1)
        await t.press("LOCK")
        rejected = await t.sub.wait_event("command_rejected")
        assert "self-check failed" in rejected["reason"]


def test_the_software_digest_is_what_configuration_md_says_it_is() -> None:
    """An auditor's own computation, from the documented records, gives the same digest."""
    sha, crc = hashlib.sha256(), 0
    count = 0
    for package in ("progressived", "progressived_drivers"):
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations
        root = Path(next(iter(spec.submodule_search_locations)))
        files = sorted(
            p
            for p in root.rglob("*")
            if p.is_file()
            and p.suffix in {".py", ".toml", ".json"}
            and "__pycache__" not in p.parts
        )
        for path in files:
            record = f"{package}/{path.relative_to(root).as_posix()}".encode()
            record += b"\0" + path.read_bytes() + b"\0"
            sha.update(record)
            crc = binascii.crc_hqx(record, crc)
            count += 1
    for name, version in sorted(dependencies().items()):
        record = f"dependency/{name}\0{version}\0".encode()
        sha.update(record)
        crc = binascii.crc_hqx(record, crc)
    assert software_digest() == (sha.hexdigest(), f"{crc:04x}", count)
    text = (ROOT / "docs" / "configuration.md").read_text()
    assert "`dependency/NAME`, a\nNUL byte, its version, a NUL byte" in text
