"""A link ledger in PostgreSQL, end to end, on a real server: ``progressived init``,
``ledger verify`` (with ``--head``), ``meters``, ``hits`` and ``link reconcile`` give what
they give for the same ledger in a file; tampering is found; the faults are one line and a
documented exit status; and ``progressived link`` serves tables from a database ledger,
losing nothing to a SIGKILL. The password comes from ``PGPASSFILE``, never the TOML.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from progressived.link.store.ledger import LinkLedger
from progressived.testing.config import render_toml
from progressived.testing.postgres import BIN, Server
from progressived.testing.waits import until
from tests import link_rig
from tests.link_harness import TableClient
from tests.test_link_acl import PASSWORDS, LinkBroker
from tests.test_link_process import Link, contribution, result_for

pytestmark = pytest.mark.e2e  # progressived and progressivectl as processes over a real server (pyproject.toml's markers)

PROGRESSIVED = [sys.executable, "-m", "progressived.cli.daemon"]
PROGRESSIVECTL = [sys.executable, "-m", "progressived.cli.ctl"]


def bare(url: str) -> str:
    """The URL as an operator writes it: no password and no passfile in it."""
    return url.split("?", 1)[0]


def run(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PGPASSFILE": str(server.passfile)}
    return subprocess.run(
        [*args], capture_output=True, text=True, check=False, env=env, timeout=120
    )


def ctl(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    return run(server, *PROGRESSIVECTL, *args)


class DatabaseRig(link_rig.Rig):
    """tests/link_rig.py's scenario with the link ledger at ``where`` (a file or a URL)."""

    def __init__(self, folder: Path, where: Path | str) -> None:
        self.params = link_rig.link_params(2)
        self.link_path = where
        LinkLedger.create(where, self.params, at=link_rig.AT, software="test")
        self.link = LinkLedger.open(where, self.params, at=link_rig.AT)
        self.sites = {f"t{i}": link_rig.Site(folder, f"t{i}", self.params.link_id) for i in (1, 2)}
        self.now_ms = 1_700_000_000_000


def audits(server: Server, db: str, tables: list[Path]) -> dict[str, Any]:
    """What the audit commands print for the link ledger at ``db``."""
    out: dict[str, Any] = {}
    for name, args in {
        "verify": ("ledger", "verify", "--db", db, "--json", "--no-record"),
        "meters": ("meters", "--db", db, "--json"),
        "hits": ("hits", "--db", db, "--json"),
        "reconcile": (
            "link",
            "reconcile",
            "--link-db",
            db,
            *(a for t in tables for a in ("--table-db", str(t))),
            "--json",
        ),
    }.items():
        done = ctl(server, *args)
        assert done.returncode == 0, (name, done.stdout, done.stderr)
        out[name] = json.loads(done.stdout)
    return out


def test_the_audit_commands_read_a_database_exactly_as_a_file(
    postgres_server: Server, postgres_url: str, tmp_path: Path
) -> None:
    (tmp_path / "file").mkdir()
    (tmp_path / "db").mkdir()
    on_file = DatabaseRig(tmp_path / "file", tmp_path / "file" / "link.db")
    on_file.play()
    on_file.close()
    in_db = DatabaseRig(tmp_path / "db", postgres_url)
    in_db.play()
    head = in_db.link.head
    in_db.close()
    url = bare(postgres_url)
    file_says = audits(postgres_server, str(tmp_path / "file" / "link.db"), on_file.table_paths())
    db_says = audits(postgres_server, url, in_db.table_paths())
    # the same rows, the same chain: every figure alike, the names of the ledgers aside
    for report in (file_says, db_says):
        report["reconcile"].pop("link_db")
        for table in report["reconcile"]["tables"].values():
            table.pop("db")
    assert db_says == file_says
    assert db_says["verify"]["ok"] and db_says["verify"]["ledger_kind"] == "link"
    assert db_says["verify"]["head_hash"] == head.hash
    assert db_says["reconcile"]["differences"] == []
    assert db_says["hits"] and db_says["meters"]["meters"]["pmg"]["identity_gap_units"] == 0
    good = ctl(
        postgres_server, "ledger", "verify", "--db", url, "--head", f"{head.seq}:{head.hash}"
    )
    assert good.returncode == 0 and f"ledger {url}: OK" in good.stdout, good.stdout + good.stderr
    wrong = ctl(postgres_server, "ledger", "verify", "--db", url, "--head", f"3:{'a' * 64}")
    assert wrong.returncode == 1 and "witnessed head 3:" in wrong.stdout
    # someone with the database's superuser edits a row: verify names it
    with postgres_server.admin(url.rsplit("/", 1)[1]) as conn:
        conn.execute("ALTER TABLE journal DISABLE TRIGGER journal_append_only")
        edited = conn.execute(
            "UPDATE journal SET data = replace(data, '\"count\":3', '\"count\":9') WHERE seq = 3"
        )
        assert edited.rowcount == 1
    broken = ctl(postgres_server, "ledger", "verify", "--db", url)
    assert broken.returncode == 1 and "FAILED at row 3" in broken.stdout, broken.stdout


def write_config(tmp: Path, url: str, port: int = 1883) -> Path:
    (tmp / "link.pw").write_text(PASSWORDS["link-a"] + "\n")
    text = render_toml(
        {
            "link": {"id": "link-a", "tables": "@TABLES@", "heartbeat_s": 0.3},
            "link.meters": [
                {"id": "pmg", "paytable": "pmg-01", "rate": 0.15, "reserve_rate": 0.02}
            ],
            "mqtt": {
                "host": "127.0.0.1",
                "port": port,
                "username": "link-a",
                "password_file": tmp / "link.pw",
            },
            "ledger": {"url": bare(url), "lease_s": 5},
            "metrics": {"port": 0},
            "control": {"socket": tmp / "link.sock"},
            "log": {"format": "json"},
        }
    )
    path = tmp / "link.toml"
    path.write_text(text.replace('"@TABLES@"', json.dumps(["t1", "t2"])))
    return path


def test_init_and_the_faults_on_a_database(
    postgres_server: Server, postgres_url: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, postgres_url)
    missing = run(postgres_server, *PROGRESSIVED, "link", "--config", str(config), "--check")
    assert missing.returncode == 3 and "no ledger in" in missing.stderr, missing.stderr
    assert missing.stderr.count("\n") == 1 and "Traceback" not in missing.stderr
    made = run(postgres_server, *PROGRESSIVED, "init", "--config", str(config))
    assert made.returncode == 0 and "created link ledger postgresql://" in made.stdout, made
    again = run(postgres_server, *PROGRESSIVED, "init", "--config", str(config))
    assert again.returncode == 6 and "already holds a ledger" in again.stderr
    checked = run(postgres_server, *PROGRESSIVED, "link", "--config", str(config), "--check")
    assert checked.returncode == 0 and "ledger head 2" in checked.stdout, checked.stderr
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT kind FROM journal ORDER BY seq").fetchall()
        meta: dict[str, str] = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    assert rows == [("link_created",), ("meter_opened",)]
    assert (meta["ledger_kind"], meta["link_id"]) == ("link", "link-a")
    # a database holding something else is not a ledger; one that cannot be reached is
    # unavailable; both one line
    foreign = postgres_server.database()
    with psycopg.connect(foreign, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (id bigint)")
    (tmp_path / "other").mkdir()
    other = write_config(tmp_path / "other", foreign)
    refused = run(postgres_server, *PROGRESSIVED, "init", "--config", str(other))
    assert refused.returncode == 4 and "holds other tables" in refused.stderr
    nobody = ctl(postgres_server, "meters", "--db", "postgresql://progressived@127.0.0.1:1/x")
    assert nobody.returncode == 2 and nobody.stderr.count("\n") == 1
    with_password = config.read_text().replace(
        "postgresql://progressived@", "postgresql://progressived:secret@"
    )
    (tmp_path / "bad.toml").write_text(with_password)
    bad = run(postgres_server, *PROGRESSIVED, "check-config", str(tmp_path / "bad.toml"))
    assert bad.returncode == 2 and "holds a password" in bad.stderr


@pytest.fixture
async def floor(
    postgres_server: Server, postgres_url: str, tmp_path: Path
) -> AsyncIterator[tuple[Link, LinkBroker]]:
    broker = LinkBroker().start()
    os.environ["PGPASSFILE"] = str(postgres_server.passfile)  # the controller's own
    try:
        config = write_config(tmp_path, postgres_url, broker.port)
        done = run(postgres_server, *PROGRESSIVED, "init", "--config", str(config))
        assert done.returncode == 0, done.stderr
        link = Link(tmp_path, config)
        link.start()
        try:
            yield link, broker
        finally:
            if link.proc is not None:
                assert link.stop() == 0
    finally:
        os.environ.pop("PGPASSFILE", None)
        broker.stop()


async def test_the_controller_serves_tables_from_a_database_and_survives_sigkill(
    floor: tuple[Link, LinkBroker], postgres_server: Server, postgres_url: str
) -> None:
    link, broker = floor
    async with TableClient(broker, "t1", PASSWORDS["t1"]) as t1:
        await until(lambda: bool(t1.of_type("heartbeat")), timeout=20)
        await t1.send(contribution(1))
        assert (await result_for(t1, 1)).status == "applied"
        link.stop(signal.SIGKILL)  # its lease is still valid: the restart takes it back
        beats = len(t1.of_type("heartbeat"))
        link.start()
        await until(lambda: len(t1.of_type("heartbeat")) > beats, timeout=30)  # the new process
        for seq in range(2, 11):
            await t1.send(contribution(seq))
        await until(
            lambda: (
                {r.seq for r in t1.of_type("result") if r.status == "applied"} >= set(range(1, 11))
            ),
            timeout=30,
        )
    assert link.stop() == 0
    with psycopg.connect(postgres_url) as conn:
        applied = conn.execute(
            "SELECT data::jsonb->>'seq' FROM journal WHERE kind = 'link_applied' ORDER BY seq"
        ).fetchall()
        lease = conn.execute("SELECT holder, token FROM lease").fetchone()
    assert sorted(int(s) for (s,) in applied) == list(range(1, 11))  # each once
    assert lease is not None and lease[1] == 2  # two runs, two tokens
    done = ctl(postgres_server, "ledger", "verify", "--db", bare(postgres_url))
    assert done.returncode == 0, done.stdout + done.stderr


def pg_recipes() -> dict[str, str]:
    """docs/ledger.md's psql recipes by their ``<!-- pg-audit-NAME -->`` marker."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "ledger.md").read_text()
    found = dict(re.findall(r"<!-- pg-audit-([a-z-]+) -->\n```sql\n(.*?)```", text, re.S))
    assert set(found) == {"head", "prev", "chain", "postings", "balances", "snapshot-hash"}
    return found


def psql(server: Server, url: str, query: str) -> str:
    done = run(
        server, str(BIN / "psql"), bare(url), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", query
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_psql_recipes_are_silent_on_a_sound_ledger_and_name_each_tamper(
    postgres_server: Server, postgres_url: str, tmp_path: Path
) -> None:
    rig = DatabaseRig(tmp_path, postgres_url)
    rig.play()
    rig.close()
    recipes = pg_recipes()
    for name, query in recipes.items():
        assert psql(postgres_server, postgres_url, query) == "", name
    database = bare(postgres_url).rsplit("/", 1)[1]
    with postgres_server.admin(database) as conn:  # as someone with the superuser would
        for table in ("journal", "postings"):
            conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER {table}_append_only")
        conn.execute("UPDATE journal SET at = '2026-11-23T17:00:01Z' WHERE seq = 4")
        conn.execute("UPDATE postings SET units = units + 1 WHERE seq = 5 AND leg = 1")
        conn.execute("UPDATE balances SET units = units + 5 WHERE account = 'meter:pmg'")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'head_seq'")
    assert psql(postgres_server, postgres_url, recipes["chain"]).split() == ["4"]
    assert "posting 1 differs" in psql(postgres_server, postgres_url, recipes["postings"])
    assert "does not balance" in psql(postgres_server, postgres_url, recipes["postings"])
    assert "meter:pmg" in psql(postgres_server, postgres_url, recipes["balances"])
    assert "meta head 3" in psql(postgres_server, postgres_url, recipes["head"])
