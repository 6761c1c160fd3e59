"""A real PostgreSQL server for tests, benchmarks and demos: one machine, a loopback port.

:func:`server` runs ``initdb`` in a temporary directory and starts the server on a free
port of 127.0.0.1 (and a private Unix socket directory), never the system's PostgreSQL on
5432, as the ``postgres`` user when run as root (PostgreSQL refuses to run as root). Logins
over TCP need a password (``scram-sha-256``): the role ``progressived`` gets one, written to a
libpq password file (``passfile``, as ``PGPASSFILE`` would name it). Each caller asks for
databases of its own (:meth:`Server.database`). Stopped and removed at the end.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

BIN = Path(os.environ.get("PROGRESSIVED_PG_BIN", "/usr/lib/postgresql/15/bin"))
ROLE = "progressived"
START_TRIES = 3  # a port taken between choosing it and the server binding it: another


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries here (Debian: ``apt-get install postgresql-15``)."""


def available() -> bool:
    return (BIN / "initdb").is_file() and (BIN / "pg_ctl").is_file()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    """A running server: ``port``, its ``passfile`` and the superuser's socket directory."""

    root: Path
    port: int
    passfile: Path
    password: str
    user: str | None  # the OS user the server runs as (``postgres`` under root)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def sockets(self) -> Path:
        return self.root / "run"

    def url(self, database: str, *, user: str = ROLE) -> str:
        """A URL for ``database`` over TCP (the password comes from :attr:`passfile`)."""
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}?passfile={self.passfile}"

    def admin(self, database: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        """The superuser, over the private Unix socket (trusted there)."""
        return psycopg.connect(
            host=str(self.sockets),
            port=self.port,
            user="postgres",
            dbname=database,
            autocommit=True,
        )

    def database(self, name: str | None = None) -> str:
        """A new empty database owned by the ``progressived`` role; its URL."""
        with self.admin() as conn:
            return self.url(create_database(conn, name))

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def kill(self) -> None:
        """SIGKILL the postmaster (a crashed primary); :meth:`start` brings it back."""
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            os.kill(self.postmaster_pid(), signal.SIGKILL)

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(a) for a in args]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 "
            "-c max_connections=50 -c shared_buffers=32MB"
        )
        done = self._run(
            str(BIN / "pg_ctl"),
            "start",
            "-w",
            "-t",
            "60",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
        )
        if done.returncode != 0:
            log = (self.root / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"pg_ctl start failed: {done.stdout}{done.stderr}\n{log}")

    def stop(self, mode: str = "fast") -> None:
        self._run(str(BIN / "pg_ctl"), "stop", "-w", "-m", mode, "-D", str(self.data))


def _os_user() -> str | None:
    """``postgres`` when running as root (initdb and the server refuse root), else us."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresUnavailable(
            "running as root needs a `postgres` user to run the server"
        ) from None
    return "postgres"


def _make(root: Path, user: str | None) -> Server:
    password = secrets.token_urlsafe(18)
    (root / "run").mkdir()
    secret = root / "initpw"
    secret.write_text("postgres-unused\n")
    if user is not None:
        record = pwd.getpwnam(user)
        for path in (root, root / "run", secret):
            os.chown(path, record.pw_uid, record.pw_gid)
    server = Server(root, free_port(), root / "pgpass", password, user)
    done = server._run(
        str(BIN / "initdb"),
        "-D",
        str(server.data),
        "-U",
        "postgres",
        "-E",
        "UTF8",
        "--locale=C",
        "--auth-local=trust",
        "--auth-host=scram-sha-256",
        f"--pwfile={secret}",
    )
    if done.returncode != 0:
        raise RuntimeError(f"initdb failed: {done.stdout}{done.stderr}")
    server.passfile.write_text(f"127.0.0.1:*:*:{ROLE}:{password}\n")
    server.passfile.chmod(0o600)
    return server


@contextlib.contextmanager
def server() -> Iterator[Server]:
    """A fresh PostgreSQL server (initdb, started, the ``progressived`` role made); stopped
    and its directory removed afterwards."""
    if not available():
        raise PostgresUnavailable(
            f"no PostgreSQL in {BIN}: install it (Debian: apt-get install postgresql-15)"
        )
    user = _os_user()
    root = Path(tempfile.mkdtemp(prefix="progressived-pg-"))
    root.chmod(0o755)
    srv: Server | None = None
    try:
        srv = _make(root, user)
        for attempt in range(START_TRIES):
            try:
                srv.start()
                break
            except RuntimeError:
                if attempt == START_TRIES - 1:
                    raise
                srv.port = free_port()
        with srv.admin() as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(ROLE), sql.Literal(srv.password)
                )
            )
        yield srv
    finally:
        if srv is not None and (root / "data" / "postmaster.pid").exists():
            srv.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


def create_database(admin: psycopg.Connection[Any], name: str | None = None) -> str:
    """Make a new empty database owned by the ``progressived`` role (a random name unless
    given) over a superuser's connection; its name."""
    name = name or f"t_{secrets.token_hex(6)}"
    admin.execute(
        sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(ROLE))
    )
    return name
