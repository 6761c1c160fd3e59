"""``progressived archive`` on a real Mosquitto and a real PostgreSQL: each table's rows
stored once, its head answered (retained), a rewritten chain refused and alarmed, a
stranger refused, and the lease that keeps a second archive from writing (docs/archive.md)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import psycopg
import pytest

from progressived.archive.core import wire
from progressived.archive.core.chain import Head
from progressived.archive.service.config import load_archive_config
from progressived.archive.service.service import ArchiveService
from progressived.archive.store.database import ArchiveStore, TableWrite
from progressived.storage.errors import Fenced, LeaseHeld, LedgerMissing
from progressived.testing.broker import Mosquitto
from progressived.testing.waits import until
from tests.archive_helpers import TABLE, rewritten, rows_of, table_ledger

PREFIX = "progressive"


def archive_file(tmp: Path, url: str, broker: Mosquitto, lease_s: float = 5) -> Path:
    path = tmp / "archive.toml"
    path.write_text(
        f'[archive]\nid = "archive-t"\ntables = ["{TABLE}", "arch-2"]\n\n'
        f'[database]\nurl = "{url}"\nlease_s = {lease_s}\nholder = "a1"\n\n'
        f'[mqtt]\nhost = "{broker.host}"\nport = {broker.port}\nkeepalive_s = 5\n'
        "reconnect_initial_s = 0.1\nreconnect_max_s = 0.5\n\n[metrics]\nenabled = false\n"
    )
    return path


class Heads:
    """A table's view of the archive: every answer on the head topics."""

    def __init__(self, broker: Mosquitto) -> None:
        self.broker = broker
        self.answers: list[tuple[str, dict[str, Any], bool]] = []
        self.client: aiomqtt.Client | None = None

    async def run(self) -> None:
        async with aiomqtt.Client(self.broker.host, self.broker.port, identifier="t-heads") as c:
            self.client = c
            await c.subscribe(f"{PREFIX}/archive/+/head", qos=1)
            async for message in c.messages:
                payload = json.loads(bytes(message.payload))
                self.answers.append((str(message.topic), payload, bool(message.retain)))

    async def send(self, table: str, payload: str | bytes) -> None:
        assert self.client is not None
        await self.client.publish(wire.rows_topic(PREFIX, table), payload, qos=1)

    def last(self, table: str) -> dict[str, Any] | None:
        found = [p for t, p, _ in self.answers if t == wire.head_topic(PREFIX, table)]
        return found[-1] if found else None


@pytest.fixture
async def heads(mosquitto: Mosquitto) -> AsyncIterator[Heads]:
    h = Heads(mosquitto)
    task = asyncio.create_task(h.run())
    await until(lambda: h.client is not None, "the test client connected")
    yield h
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_rows_are_stored_once_and_a_rewritten_chain_is_refused(
    tmp_path: Path, postgres_url: str, mosquitto: Mosquitto, heads: Heads
) -> None:
    rows = rows_of(table_ledger(tmp_path / "ledger.db"))
    config = load_archive_config(archive_file(tmp_path, postgres_url, mosquitto))
    with pytest.raises(LedgerMissing):  # an empty database is not an archive
        ArchiveStore.open_archive(postgres_url, "existing", "archive-t", "")
    ArchiveStore.open_archive(postgres_url, "new", "archive-t", "now").close()
    service = ArchiveService(config)
    runner = asyncio.create_task(service.run(install_signals=False))
    try:
        await until(lambda: service.session.connected, "the archive connected")
        half = len(rows) // 2
        await heads.send(TABLE, wire.encode_rows(TABLE, rows[:half]))
        await heads.send(TABLE, wire.encode_rows(TABLE, rows[: half + 10]))  # a resend
        await heads.send(TABLE, wire.encode_rows(TABLE, rows[half + 10 :]))
        await heads.send(TABLE, wire.encode_rows(TABLE, rows[:5]))  # an old repeat
        last = rows[-1]

        def archived() -> bool:
            answer = heads.last(TABLE)
            return answer is not None and answer["seq"] == last.seq and answer["status"] == "ok"

        await until(archived, "the archived head answered")
        assert heads.last(TABLE)["hash"] == last.hash
        with psycopg.connect(postgres_url) as conn:
            count = conn.execute(
                "SELECT count(*), count(DISTINCT seq), max(seq) FROM archive_rows "
                "WHERE table_id = %s",
                (TABLE,),
            ).fetchone()
            assert count == (len(rows), len(rows), last.seq)
            stored = conn.execute(
                "SELECT head_seq, head_hash FROM archive_heads WHERE table_id = %s", (TABLE,)
            ).fetchone()
            assert stored == (last.seq, last.hash)

        # A consistent rewrite of the tail (its own chain holds): refused, alarmed, not stored.
        forged = rewritten(rows, half)
        await heads.send(TABLE, wire.encode_rows(TABLE, forged[half : half + 20]))
        await until(
            lambda: (heads.last(TABLE) or {}).get("code") == "rewritten", "the rewrite refused"
        )
        answer = heads.last(TABLE)
        assert answer is not None and answer["status"] == "refused"
        assert answer["seq"] == last.seq  # the archived head stands
        # Junk from a member and rows from a stranger: refused with a code, never stored.
        await heads.send(TABLE, b"[" * 100)
        await heads.send("stranger", wire.encode_rows("stranger", rows[:2]))
        await until(
            lambda: (heads.last("stranger") or {}).get("code") == "not-a-member",
            "the stranger refused",
        )
        await until(lambda: (heads.last(TABLE) or {}).get("code") == "too-deep", "junk refused")
        # A newcomer finds the member's head retained, the stranger's answer not.
        async with aiomqtt.Client(mosquitto.host, mosquitto.port, identifier="t-late") as late:
            await late.subscribe(f"{PREFIX}/archive/+/head", qos=1)
            await late.subscribe("test/marker", qos=1)
            await late.publish("test/marker", b"after the retained ones", qos=1)
            seen = []
            async with asyncio.timeout(10):
                async for message in late.messages:
                    if str(message.topic) == "test/marker":
                        break
                    seen.append(str(message.topic))
        assert seen == [wire.head_topic(PREFIX, TABLE)]
        with psycopg.connect(postgres_url) as conn:
            assert conn.execute("SELECT count(*) FROM archive_rows").fetchone() == (len(rows),)
            alarms = conn.execute("SELECT table_id, code, seq FROM archive_alarms").fetchall()
            assert alarms == [(TABLE, "rewritten", rows[half].seq)]
        assert service.refusals[(TABLE, "rewritten")] == 1
        assert service.refusals[("(not a member)", "not-a-member")] == 1
        exposition = service.metrics.exposition().decode()
        assert f'progressive_archive_rows_stored_total{{archive="archive-t"}} {len(rows)}.0' in (
            exposition
        )
        assert 'progressive_archive_refusals_total{archive="archive-t",code="rewritten"' in (
            exposition.replace(f'table="{TABLE}",', "")
        )
    finally:
        service.lifecycle.request_stop()
        assert await asyncio.wait_for(runner, 10) == 0


def test_the_lease_fences_a_second_archive(tmp_path: Path, postgres_url: str) -> None:
    rows = rows_of(table_ledger(tmp_path / "ledger.db", rounds=2))
    first = ArchiveStore.open_archive(postgres_url, "new", "archive-t", "now")
    second = ArchiveStore.open_archive(postgres_url, "existing", "archive-t", "")
    try:
        lease = first.acquire("a1", 1.0)
        with pytest.raises(LeaseHeld):
            second.acquire("a2", 1.0)
        write = TableWrite(TABLE, tuple(rows[:3]), Head(rows[2].seq, rows[2].hash))
        first.store([write], [], lease)
        time.sleep(1.2)  # the first archive paused past its term
        taken = second.acquire("a2", 5.0)
        assert taken.token == lease.token + 1
        later = TableWrite(TABLE, tuple(rows[3:6]), Head(rows[5].seq, rows[5].hash))
        with pytest.raises(Fenced):
            first.store([later], [], lease)
        assert second.heads() == {TABLE: Head(rows[2].seq, rows[2].hash)}  # nothing of it
        second.store([later], [], taken)
        assert second.hashes(TABLE, 1, 99) == {r.seq: r.hash for r in rows[:6]}
    finally:
        first.close()
        second.close()


def test_broker_acl_writes_the_documented_archive_account(capsys: pytest.CaptureFixture[str]) -> None:
    """``progressivectl broker-acl --archive`` prints docs/archive.md's and docs/mqtt.md's
    lines for the archive, and its password step."""
    from progressived.cli import ctl
    from tests.conftest import ROOT

    assert ctl.main(["broker-acl", "--archive", "archive", "--sign", "sign-lobby"]) == 0
    acl = capsys.readouterr().out
    block = "pattern write progressive/archive/%u/rows\npattern read  progressive/archive/%u/head\n"
    account = (
        "user archive\ntopic read  progressive/archive/+/rows\n"
        "topic write progressive/archive/+/head\n"
    )
    assert block in acl and account in acl
    for doc in ("archive.md", "mqtt.md"):
        text = (ROOT / "docs" / doc).read_text()
        assert block in text and account in text, doc
    assert ctl.main(["broker-acl", "--archive", "archive", "--passwd"]) == 0
    assert "mosquitto_passwd /etc/mosquitto/passwd archive\n" in capsys.readouterr().out
    assert ctl.main(["broker-acl", "--archive", "sign-lobby", "--sign", "sign-lobby"]) == 2


async def test_a_standby_takes_over_and_the_tables_rows_go_on(
    tmp_path: Path, postgres_url: str, mosquitto: Mosquitto, heads: Heads
) -> None:
    """Two archives of one file: one serves, the other waits connected to no broker; the
    first stopped, the second takes the lease and goes on from the archived heads."""
    rows = rows_of(table_ledger(tmp_path / "ledger.db", rounds=4))
    path = archive_file(tmp_path, postgres_url, mosquitto, lease_s=2)
    ArchiveStore.open_archive(postgres_url, "new", "archive-t", "now").close()
    first = ArchiveService(load_archive_config(path))
    second_file = tmp_path / "second.toml"
    second_file.write_text(path.read_text().replace('holder = "a1"', 'holder = "a2"'))
    second = ArchiveService(load_archive_config(second_file))
    one = asyncio.create_task(first.run(install_signals=False))
    await until(lambda: first.session.connected, "the first archive serves")
    two = asyncio.create_task(second.run(install_signals=False))
    try:
        await heads.send(TABLE, wire.encode_rows(TABLE, rows[:10]))
        await until(lambda: (heads.last(TABLE) or {}).get("seq") == rows[9].seq, "archived")
        assert not second.active and second.session.attempts == 0  # a standby: no broker
        first.lifecycle.request_stop()
        assert await asyncio.wait_for(one, 10) == 0  # it released the lease
        await until(lambda: second.session.connected, "the standby took over", timeout=20)
        await heads.send(TABLE, wire.encode_rows(TABLE, rows[5:]))
        await until(lambda: (heads.last(TABLE) or {}).get("seq") == rows[-1].seq, "went on")
        with psycopg.connect(postgres_url) as conn:
            found = conn.execute("SELECT count(*), max(seq) FROM archive_rows").fetchone()
        assert found == (len(rows), rows[-1].seq)
    finally:
        first.lifecycle.request_stop()
        second.lifecycle.request_stop()
        await asyncio.gather(one, two, return_exceptions=True)


def test_the_archive_commands_exit_codes(tmp_path: Path, postgres_url: str, mosquitto: Mosquitto) -> None:
    from progressived.cli import daemon

    path = archive_file(tmp_path, postgres_url, mosquitto)
    assert daemon.main(["archive", "--config", str(path)]) == 3  # no archive: --init first
    assert daemon.main(["archive", "--config", str(path), "--init"]) == 0
    assert daemon.main(["archive", "--config", str(path), "--init"]) == 6
    bad = tmp_path / "bad.toml"
    bad.write_text(path.read_text().replace("lease_s = 5", "lease_s = 0"))
    assert daemon.main(["archive", "--config", str(bad)]) == 2
    assert daemon.main(["check-config", str(path)]) == 0
    assert daemon.main(["check-config", str(bad)]) == 2
    assert daemon.main(["run", "--config", str(path)]) == 2  # the archive's file, not a table's
