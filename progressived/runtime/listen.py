"""The addresses a process listens on, and the one clear line when one cannot be had.

Every listener of the product (the table's and the link's metrics, their control sockets)
is claimed at start, before the process says it is ready. A port another process holds, an
address that is not on this machine, or a control socket a live daemon answers on is a
:class:`ListenError` naming the address and the configuration key; the commands print it
as one line and exit with status 7 (docs/operations.md, "Exit codes").

A Unix socket is never taken from a live process, and a process removes at its stop only
the socket file it made itself (its device and inode), never one another process put at
the same path since.
"""

from __future__ import annotations

import fcntl
import os
import resource
import socket
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

    from progressived.runtime.metrics_http import MetricsServer

log = structlog.get_logger("progressived.listen")

PROBE_TIMEOUT_S = 2.0  # a live daemon accepts at once (the kernel queues the connection)
BACKLOG = 64


class ListenError(Exception):
    """An address this process must listen on is taken or cannot be bound."""


def host_port(host: str, port: int) -> str:
    """``127.0.0.1:9464``, ``[::1]:9464``: an address as a person types it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def serve_metrics(registry: CollectorRegistry, address: str, port: int, key: str) -> MetricsServer:
    """Serve ``registry`` on ``http://address:port/metrics`` from a bounded server in its own
    thread (:mod:`progressived.runtime.metrics_http`); the server, its bound port ``.port``.

    ``key`` names the configuration section in the error (``[metrics]``).
    """
    from progressived.runtime.metrics_http import MetricsServer  # noqa: PLC0415 - progressivectl imports this module too

    server = MetricsServer(registry, address, port)
    try:
        server.start()
    except OSError as exc:  # EADDRINUSE, EADDRNOTAVAIL, EACCES, an unknown host name
        why = exc.strerror or str(exc)
        raise ListenError(
            f"cannot listen on {host_port(address, port)} for metrics: {why} (another "
            f"process has the port? set {key} address and port, or enabled = false)"
        ) from None
    return server


def raise_open_files_limit() -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit (systemd's default soft
    limit is 1024 whatever the hard one); the soft limit now. Every listener bounds its own
    connections well below it, so the ledger, the broker and the control socket keep theirs.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError):  # not allowed here (a container's limit): keep ours
            return soft
        return hard
    return soft


Identity = tuple[int, int]  # (st_dev, st_ino) of the socket file this process made


def claim_unix_socket(path: Path, key: str) -> tuple[socket.socket, Identity]:
    """A listening Unix socket bound at ``path``, and the identity of the file it made.

    Under an exclusive ``flock`` on the directory (two processes starting together cannot
    both decide a socket is stale): a socket file already there is probed with a connect;
    an answer means a live process holds it (:class:`ListenError`, the file is left alone),
    a refusal means its process died (the file is removed). A path that is not a socket is
    never removed.
    """
    try:
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise ListenError(
            f"cannot listen on the control socket {path}: its directory: "
            f"{exc.strerror or exc} ({key})"
        ) from None
    try:
        fcntl.flock(directory, fcntl.LOCK_EX)
        _clear_stale(path, key)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(path))
            sock.listen(BACKLOG)
            made = os.stat(path)
        except OSError as exc:
            sock.close()
            raise ListenError(
                f"cannot listen on the control socket {path}: {exc.strerror or exc} ({key})"
            ) from None
    finally:
        os.close(directory)  # releases the lock
    return sock, (made.st_dev, made.st_ino)


def _clear_stale(path: Path, key: str) -> None:
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(found.st_mode):
        raise ListenError(
            f"cannot listen on the control socket {path}: a file that is not a socket is "
            f"there (not removing it; remove it by hand or change {key})"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(PROBE_TIMEOUT_S)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:  # nobody listens: its process died without removing it
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ListenError(
                f"cannot listen on the control socket {path}: a stale socket is there and "
                f"cannot be removed ({exc.strerror}); remove it by hand ({key})"
            ) from None
        log.info("stale control socket removed", path=str(path))
        return
    except FileNotFoundError:
        return
    except OSError as exc:  # EACCES (another user's), a timeout (a full backlog)
        raise ListenError(
            f"cannot listen on the control socket {path}: cannot tell whether a process "
            f"holds it ({exc.strerror or 'no answer'}); not removing it ({key})"
        ) from None
    finally:
        probe.close()
    raise ListenError(
        f"cannot listen on the control socket {path}: a running process answers there "
        f"(another daemon with the same {key}?); not removing it"
    )


def release_unix_socket(path: Path, identity: Identity) -> None:
    """Remove ``path`` if it is still the socket file this process made, else leave it."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    if (found.st_dev, found.st_ino) != identity:
        log.info("control socket replaced by another process: left in place", path=str(path))
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:  # the directory's mode changed meanwhile: say so, stop anyway
        log.warning("control socket not removed", path=str(path), error=exc.strerror)
