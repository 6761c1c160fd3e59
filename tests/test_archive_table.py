"""The table's side of the archive, end to end in one process: the real daemon on a real
Mosquitto with the board simulator, the archive on a real PostgreSQL. The table keeps
playing without its archive (degraded past the lag it is given), the archive catches up
from the table's ledger, and status, health and metrics say how far behind it is
(docs/archive.md, "The table's side")."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import psycopg
import pytest

from progressived.archive.service.config import load_archive_config
from progressived.archive.service.service import ArchiveService
from progressived.archive.store.database import ArchiveStore
from progressived.cli import ctl
from progressived.config.daemon import load_daemon_config
from progressived.daemon.health import assess
from progressived.daemon.service import Controller
from progressived.testing.waits import until
from tests.daemon_harness import TABLE, table
from tests.test_archive_service import archive_file

pytestmark = pytest.mark.e2e  # the real daemon and the archive, end to end


async def test_the_table_plays_without_its_archive_and_it_catches_up(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with table(tmp_path) as t:
        t.config.write_text(
            t.config.read_text() + "\n[archive]\nmax_lag_rows = 3\nmax_lag_s = 3600\n"
            "resend_s = 1\n"
        )
        controller = Controller(load_daemon_config(t.config))
        runner = asyncio.create_task(controller.run(install_signals=False))
        service: ArchiveService | None = None
        try:
            await t.online()
            feed = controller.table.archive
            assert feed is not None

            def status() -> dict[str, object]:
                return feed.status()

            # No archive yet: every row is only on the board; degraded, still playing.
            await until(lambda: feed.lag_rows > 3, "the lag counted")
            ok, why = assess(controller.health, controller.config.watchdog)
            assert not ok and "the archive is" in why and "rows" in why
            assert status()["heard"] is False
            exposition = controller.table.metrics.exposition().decode()
            assert f'progressive_archive_lag_rows{{table="{TABLE}"}}' in exposition
            assert await controller.journal.record("supervisor_key", {"key": "k"}, publish=False)

            # The archive starts: the table's rows flow until nothing is behind.
            ArchiveStore.open_archive(postgres_url, "new", "archive-t", "now").close()
            path = archive_file(tmp_path, postgres_url, t.broker)
            path.write_text(path.read_text().replace('"arch-1"', f'"{TABLE}"'))
            service = ArchiveService(load_archive_config(path))
            archive = asyncio.create_task(service.run(install_signals=False))

            def caught_up() -> bool:
                s = status()
                return bool(s["heard"]) and s["lag_rows"] == 0 and s["archived_seq"] == s["head_seq"]

            await until(caught_up, "the archive caught up", timeout=30)
            assert status()["archived_hash"] == controller.ledger.head_hash
            await until(lambda: not controller.health.archive, "the archive's reason cleared")
            ok, why = assess(controller.health, controller.config.watchdog)
            assert ok, why
            # A new row goes off the board within moments.
            assert await controller.journal.record("supervisor_key", {"key": "k2"}, publish=False)
            await until(caught_up, "the new row archived", timeout=30)
            # What an operator sees: progressivectl status, in words and in JSON.
            socket = str(tmp_path / "control.sock")
            assert await asyncio.to_thread(ctl.main, ["status", "--socket", socket]) == 0
            words = capsys.readouterr().out
            assert "archive archive-t: archived to row" in words and "rows behind" in words
            assert await asyncio.to_thread(ctl.main, ["status", "--socket", socket, "--json"]) == 0
            # (the daemon's own log lines share this process's standard output)
            answer = [
                line for line in capsys.readouterr().out.splitlines()
                if not re.match(r"\d{4}-\d\d-\d\d ", line)
            ]
            shown = json.loads("\n".join(answer))["status"]["archive"]
            assert shown["heard"] and shown["archive"] == "archive-t" and shown["refused"] is None
            assert shown["archived_seq"] <= shown["head_seq"] and shown["max_lag_rows"] == 3
            with psycopg.connect(postgres_url) as conn:
                found = conn.execute(
                    "SELECT count(*), max(seq) FROM archive_rows WHERE table_id = %s", (TABLE,)
                ).fetchone()
            assert found is not None and found[0] == found[1] >= shown["archived_seq"]

            # Pull the SD card: the daemon gone, its ledger deleted; a new one from the archive.
            controller.request_stop()
            await asyncio.wait_for(runner, 15)
            ledger = controller.config.ledger.path
            archived = service.heads[TABLE]
            for leftover in ("", "-wal", "-shm"):
                ledger.with_name(ledger.name + leftover).unlink(missing_ok=True)
            restore = ["ledger", "restore", "--from", postgres_url, "--table", TABLE]
            assert await asyncio.to_thread(ctl.main, [*restore, "--out", str(ledger)]) == 0
            assert f"head {archived.seq}:{archived.hash}" in capsys.readouterr().out
            controller = Controller(load_daemon_config(t.config))
            runner = asyncio.create_task(controller.run(install_signals=False))
            await t.online(2)
            assert controller.ledger.head_seq > archived.seq  # it went on from the restored head
            feed = controller.table.archive
            assert feed is not None
            await until(caught_up, "the new board's rows archived", timeout=30)
            with psycopg.connect(postgres_url) as conn:
                found = conn.execute(
                    "SELECT count(*), max(seq) FROM archive_rows WHERE table_id = %s", (TABLE,)
                ).fetchone()
                alarms = conn.execute("SELECT count(*) FROM archive_alarms").fetchone()
            assert found is not None and found[0] == found[1] > archived.seq  # one chain
            assert alarms == (0,)
            service.lifecycle.request_stop()
            assert await asyncio.wait_for(archive, 10) == 0
        finally:
            if service is not None:
                service.lifecycle.request_stop()
            controller.request_stop()
            await asyncio.wait_for(runner, 15)
