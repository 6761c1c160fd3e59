"""The control socket: operator actions that change state, restricted by group.

A Unix-domain socket (mode 0660, owned by the configured group) speaking one JSON object
per line each way. The peer's credentials (``SO_PEERCRED``) are checked too: root, the
daemon's own user, or a member of the group. Every action that changes state needs an
operator id and a reason, parameter changes and meter corrections also a second person's
approval, and each is journaled. A caller refused for its credentials is journaled
(``control_refused``); a correction the engine refuses is journaled as
``command_rejected``; a request the operator desk turns down before that (no operator or
reason, no second approver, a round open, an invalid file) is answered with the reason only.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import os
import pwd
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from progressived.core.wirejson import WireError, loads_object
from progressived.runtime.listen import ListenError, claim_unix_socket, release_unix_socket
from progressived.runtime.ratelimit import RateLimitedLog

log = structlog.get_logger("progressived.control")

MAX_REQUEST = 64 * 1024  # bytes of one request line
MAX_ANSWER = 4 * 1024 * 1024  # bytes of one answer, read by the client
REQUEST_TIMEOUT_S = 10.0  # a client has this long to send its whole line
REFUSED_LOG_EVERY_S = 60.0  # one log line per refusal code and minute


@dataclass(frozen=True, slots=True)
class Peer:
    pid: int
    uid: int
    gid: int

    def groups(self) -> set[int]:
        """The peer's gid (from ``SO_PEERCRED``) and its uid's groups in the group database.

        Not the process's own list from ``/proc/<pid>/status``: the units'
        ``ProtectProc=invisible`` hides other users' processes from the daemon, so every
        operator but root would read as in no group. The group database (``getpwuid`` and
        ``getgrouplist``, what ``id USER`` prints) is what ``usermod -aG`` changes; the
        socket's own mode (0660, the group) is checked by the kernel against the caller's
        process groups first.
        """
        found = {self.gid}
        try:
            user = pwd.getpwuid(self.uid)
        except KeyError:  # a uid without an account: its gid alone
            return found
        found.add(user.pw_gid)
        with contextlib.suppress(OSError):
            found.update(os.getgrouplist(user.pw_name, user.pw_gid))
        return found


MAX_SOCKET_PATH = 107  # bytes: sockaddr_un's sun_path holds 108, with the closing NUL


def control_socket_problem(path: Path) -> str | None:
    """Why this user could not make the control socket at ``path``, or None if it could.

    Checked before a daemon starts anything: under systemd the unit's ``RuntimeDirectory=``
    makes the directory, but run by hand it is missing (``/run`` is emptied at boot and the
    unit removes it when it stops); and a path longer than a Unix socket's address holds
    cannot be bound at all. Finding either out once the ledger is open and the loops run
    would end in a traceback instead of one line naming the path.
    """
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH:
        return (
            f"cannot make the control socket {path}: the path is {size} bytes long, more "
            f"than the {MAX_SOCKET_PATH} a Unix socket's address holds (choose a shorter one)"
        )
    directory = path.parent
    if directory.is_dir():
        if os.access(directory, os.W_OK | os.X_OK):
            return None
        why = f"the directory {directory} is not writable by this user"
    else:
        existing = directory
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if existing.is_dir() and os.access(existing, os.W_OK | os.X_OK):
            return None  # start() makes it
        why = f"the directory {directory} does not exist and this user cannot create it"
    user = pwd.getpwuid(os.getuid()).pw_name
    return (
        f"cannot make the control socket {path}: {why} (the unit's RuntimeDirectory= makes "
        f"it under systemd; by hand: install -d -m 0755 -o {user} -g {user} {directory})"
    )


def peer_of(sock: socket.socket) -> Peer:
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return Peer(pid, uid, gid)


Handler = Callable[[Mapping[str, Any], Peer], Awaitable[dict[str, Any]]]


class ControlServer:
    def __init__(
        self,
        path: Path,
        group: str | None,
        handler: Handler,
        on_refused: Callable[[Peer, str], Awaitable[None]] | None = None,
    ) -> None:
        self.path = path
        self.group = group
        self.gid = grp.getgrnam(group).gr_gid if group else None
        self.handler = handler
        self.on_refused = on_refused
        self._server: asyncio.AbstractServer | None = None
        self._sock: socket.socket | None = None
        self._identity: tuple[int, int] | None = None
        self._refused_log = RateLimitedLog(1, REFUSED_LOG_EVERY_S, logger=log)  # per code

    async def start(self) -> None:
        """Claim the socket (unless :meth:`claim` did) and answer on it."""
        if self._sock is None:
            self.claim()
        assert self._sock is not None
        self._server = await asyncio.start_unix_server(
            self._serve, sock=self._sock, limit=MAX_REQUEST
        )
        log.info("control socket", path=str(self.path), group=self.group)

    def claim(self) -> None:
        """Bind the socket now, before anything else starts; answer only from :meth:`start`.

        A socket file already at the path is probed: a process that answers there keeps it
        (:class:`~progressived.runtime.listen.ListenError`: two daemons must not share a control
        socket); a socket nobody answers on was left by a process that died and is
        replaced. The path's identity is remembered so that :meth:`stop` removes only the
        socket this process made.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._sock, self._identity = claim_unix_socket(self.path, "[control] socket")
        try:
            os.chmod(self.path, 0o660)
            if self.gid is not None:
                os.chown(self.path, -1, self.gid)
        except OSError as exc:
            self._sock.close()
            release_unix_socket(self.path, self._identity)
            self._sock = self._identity = None
            raise ListenError(
                f"cannot give the control socket {self.path} to group {self.group}: "
                f"{exc.strerror} (the daemon's user must be a member of [control] group)"
            ) from None

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        elif self._sock is not None:
            self._sock.close()
        self._sock = None
        if self._identity is not None:
            release_unix_socket(self.path, self._identity)
            self._identity = None

    def authorized(self, peer: Peer) -> bool:
        if peer.uid in (0, os.getuid()):
            return True
        return self.gid is not None and self.gid in peer.groups()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            peer = peer_of(writer.get_extra_info("socket"))
            if not self.authorized(peer):
                why = f"uid {peer.uid} is not in group {self.group or '(none configured)'}"
                # Its request is read first (bounded as any): a refusal written and the
                # socket closed before the client has sent made its send fail with a broken
                # pipe instead of reading why.
                with contextlib.suppress(WireError):
                    await read_request(reader)
                log.warning("control refused", pid=peer.pid, uid=peer.uid, reason=why)
                if self.on_refused is not None:
                    await self.on_refused(peer, why)
                await _reply(writer, {"ok": False, "error": f"permission denied: {why}"})
                return
            try:
                request = await read_request(reader)
            except WireError as exc:
                self._refuse_request(peer, exc)
                await _reply(
                    writer, {"ok": False, "code": exc.code, "error": f"bad request: {exc.reason}"}
                )
                return
            try:
                response = await self.handler(request, peer)
            except Exception as exc:  # a bug must not take the daemon down
                log.exception("control handler failed")
                response = {"ok": False, "error": f"internal error: {exc}"}
            await _reply(writer, response)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _refuse_request(self, peer: Peer, exc: WireError) -> None:
        """One log line per refusal code a minute (a broken or hostile client may repeat)."""
        why = {"code": exc.code, "reason": exc.reason}
        self._refused_log.warning(
            "control request refused", per=exc.code, pid=peer.pid, uid=peer.uid, **why
        )


async def read_request(reader: asyncio.StreamReader) -> dict[str, Any]:
    """One request: a line of at most MAX_REQUEST bytes within REQUEST_TIMEOUT_S, a JSON
    object (:mod:`progressived.core.wirejson`), or :class:`WireError` (``timeout`` too)."""
    try:
        line = await asyncio.wait_for(reader.readline(), timeout=REQUEST_TIMEOUT_S)
    except TimeoutError:
        raise WireError("timeout", f"no whole line within {REQUEST_TIMEOUT_S:g} s") from None
    except ValueError:  # the line is longer than the stream's limit (MAX_REQUEST)
        raise WireError("too-large", f"a line over {MAX_REQUEST} bytes") from None
    return loads_object(line, max_bytes=MAX_REQUEST)


def read_answer(data: bytes) -> dict[str, Any]:
    """The daemon's answer (client side): also bounded, and a JSON object."""
    return loads_object(data, max_bytes=MAX_ANSWER)


async def _reply(writer: asyncio.StreamWriter, payload: Mapping[str, Any]) -> None:
    writer.write(json.dumps(payload, sort_keys=True).encode() + b"\n")
    with contextlib.suppress(ConnectionError):
        await writer.drain()


def request(path: Path, payload: Mapping[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """The client side (blocking): one request, one response."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        # A daemon that refuses may answer and close before reading: its answer is still
        # there to read after a broken pipe.
        with contextlib.suppress(BrokenPipeError):
            sock.sendall(json.dumps(payload).encode() + b"\n")
        data = bytearray()
        while not data.endswith(b"\n") and len(data) <= MAX_ANSWER:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    if not data:
        raise WireError("no-answer", "the daemon closed the connection without an answer")
    try:
        return read_answer(bytes(data))
    except WireError as exc:
        raise WireError(exc.code, f"the daemon's answer: {exc.reason}") from None
