"""Two ``progressived link`` processes over one link ledger in a real PostgreSQL, a real
Mosquitto (or two) with docs/link.md's ACL, and a table that resends what is unanswered as a
table's outbox does (tests/test_link_standby.py, bench/link_takeover.py).

The database notes who wrote each journal row: a trigger (added by the rig after ``init``,
in a table of its own that the ledger ignores) stores each new row's ``seq`` with the
writing session's ``application_name``, which the controller sets to its lease's holder and
fencing token once it holds it -- so the rows can be counted by holder and token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from progressived.link.core.messages import Result, encode
from progressived.testing.config import render_toml
from progressived.testing.ha.link import control_status
from progressived.testing.postgres import Server
from tests.link_harness import TableClient, until
from tests.test_link_acl import PASSWORDS, LinkBroker
from tests.test_link_process import contribution

PROGRESSIVED = [sys.executable, "-m", "progressived.cli.daemon"]
PROGRESSIVECTL = [sys.executable, "-m", "progressived.cli.ctl"]
LEASE_S = 2.0

WRITTEN_BY = """
CREATE TABLE written_by (seq bigint PRIMARY KEY, app text NOT NULL);
CREATE FUNCTION note_writer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO written_by VALUES (NEW.seq, current_setting('application_name'));
  RETURN NEW;
END $$;
CREATE TRIGGER note_writer AFTER INSERT ON journal FOR EACH ROW EXECUTE FUNCTION note_writer();
"""


def bare(url: str) -> str:
    return url.split("?", 1)[0]


def write_config(folder: Path, url: str, holder: str, brokers: list[LinkBroker]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "link.pw").write_text(PASSWORDS["link-a"] + "\n")
    text = render_toml(
        {
            "link": {"id": "link-a", "tables": "@TABLES@", "heartbeat_s": 0.3},
            "link.meters": [
                {"id": "pmg", "paytable": "pmg-01", "rate": 0.15, "reserve_rate": 0.02}
            ],
            "mqtt": {
                "hosts": "@HOSTS@",
                "username": "link-a",
                "password_file": folder / "link.pw",
                "reconnect_initial_s": 0.2,
                "reconnect_max_s": 1.0,
            },
            "ledger": {"url": bare(url), "lease_s": LEASE_S, "holder": holder},
            "metrics": {"port": 0},
            "control": {"socket": folder / "link.sock"},
            "log": {"format": "json"},
        }
    )
    hosts = [f"127.0.0.1:{b.port}" for b in brokers]
    path = folder / "link.toml"
    path.write_text(
        text.replace('"@TABLES@"', json.dumps(["t1", "t2"])).replace('"@HOSTS@"', json.dumps(hosts))
    )
    return path


class Controller:
    """One ``progressived link`` process (its own folder: file, socket, logs)."""

    def __init__(self, folder: Path, config: Path, holder: str) -> None:
        self.folder, self.config, self.holder = folder, config, holder
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self, *extra: str) -> None:
        self.runs += 1
        # The child writes its own copy of the descriptor; the rig's is closed at once.
        with (self.folder / f"link-{self.runs}.log").open("wb") as log:
            self.proc = subprocess.Popen(
                [*PROGRESSIVED, "link", "--config", str(self.config), *extra],
                stdout=log,
                stderr=log,
            )

    def status(self) -> dict[str, Any] | None:
        """The control socket's status (None while it does not answer)."""
        return control_status(self.folder / "link.sock")

    def role(self) -> str | None:
        status = self.status()
        return None if status is None else str(status["role"])

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for path in sorted(self.folder.glob("link-*.log")):
            for line in path.read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError):  # after the journal's "<6>" prefix
                    lines.append(json.loads(line[line.find("{") :]))
        return lines

    def send(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # a stopped process cannot take SIGTERM
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=30)
        self.proc = None
        return code


class Outbox:
    """A table's outbox: every message is sent, then sent again every ``resend_s`` until
    its result comes (as the table daemon's link client does)."""

    def __init__(self, table: TableClient, resend_s: float = 0.4) -> None:
        self.table, self.resend_s = table, resend_s
        self.waiting: dict[int, bytes] = {}
        self._task: asyncio.Task[None] | None = None

    def answered(self) -> dict[int, list[Result]]:
        """The results by sequence; a ``resend`` (the link wants an earlier sequence first)
        answers nothing: the message stays in the outbox, sent again with the earlier ones."""
        found: dict[int, list[Result]] = {}
        for r in self.table.of_type("result"):
            assert isinstance(r, Result)
            if r.status != "resend":
                found.setdefault(r.seq, []).append(r)
        return found

    async def send(self, seq: int) -> None:
        payload = encode(contribution(seq))
        self.waiting[seq] = payload
        await self.table.send(payload)

    async def _resend(self) -> None:
        while True:
            await asyncio.sleep(self.resend_s)
            done = self.answered()
            for seq in [s for s in self.waiting if s in done]:
                del self.waiting[seq]
            for payload in list(self.waiting.values()):
                with contextlib.suppress(Exception):  # the broker may be going away
                    await self.table.send(payload)

    async def __aenter__(self) -> Outbox:
        self._task = asyncio.create_task(self._resend())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def all_answered(self, seqs: range, timeout: float) -> None:
        await until(lambda: set(seqs) <= set(self.answered()), timeout)


class Pair:
    """Two controllers (``a`` then ``b``) of one link over the database at ``url``."""

    def __init__(self, root: Path, server: Server, url: str, brokers: list[LinkBroker]) -> None:
        self.server, self.url = server, url
        os.environ["PGPASSFILE"] = str(server.passfile)
        self.a = Controller(root / "a", write_config(root / "a", url, "ctl-a", brokers), "ctl-a")
        self.b = Controller(root / "b", write_config(root / "b", url, "ctl-b", brokers), "ctl-b")
        done = subprocess.run(
            [*PROGRESSIVED, "init", "--config", str(self.a.config)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(WRITTEN_BY)

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url) as conn:
            return list(conn.execute(query).fetchall())

    def applied(self) -> list[int]:
        """The table sequences applied, in ledger order (each once if nothing doubled)."""
        return [
            int(s)
            for (s,) in self.rows(
                "SELECT data::jsonb->>'seq' FROM journal WHERE kind = 'link_applied' ORDER BY seq"
            )
        ]

    def writers(self) -> dict[int, str]:
        """Each journal row (after init) by its writer: ``progressived HOLDER token N``."""
        return dict(self.rows("SELECT seq, app FROM written_by ORDER BY seq"))

    async def wait_role(self, c: Controller, role: str, timeout: float) -> float:
        """Wait until ``c`` says ``role``; returns the monotonic time it was seen."""
        await until(lambda: c.role() == role, timeout)
        return time.monotonic()

    def stop(self) -> None:
        for c in (self.a, self.b):
            if c.proc is not None:
                c.stop(signal.SIGKILL)
        os.environ.pop("PGPASSFILE", None)
