"""May a user open the ledger for writing? The files ``run`` opens, checked by the kernel.

``run`` opens the ledger read-write, and beside it SQLite's ``-wal`` and ``-shm`` files and
the one-writer lock ``.lock`` (each created when missing, so then the directory must be
writable). ``check-config`` asks the kernel (``access(2)`` with the effective ids, so
ancestor directories, ACLs and read-only mounts count) for the user it runs as, which under
the unit's ``ExecStartPre=`` is the daemon's user. ``--user NAME`` (root only) asks for
another user: a child process drops to that user's uid, gid and groups, asks, and reports.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import stat
from pathlib import Path

COMPANIONS = ("-wal", "-shm", ".lock")


def _describe(path: Path) -> str:
    """``root:progressived 0640``: who owns a file and its mode, for the message."""
    try:
        found = path.stat()
    except OSError:
        return "?"
    try:
        owner = pwd.getpwuid(found.st_uid).pw_name
    except KeyError:
        owner = str(found.st_uid)
    try:
        group = grp.getgrgid(found.st_gid).gr_name
    except KeyError:
        group = str(found.st_gid)
    return f"{owner}:{group} {stat.S_IMODE(found.st_mode):04o}"


def problems_here(ledger: Path, who: str) -> list[str]:
    """What keeps ``who`` (this process's effective user) from opening ``ledger`` to write."""
    found: list[str] = []

    def can(path: Path, mode: int) -> bool:
        return os.access(path, mode, effective_ids=True)

    if not can(ledger, os.R_OK | os.W_OK):
        what = "read" if not can(ledger, os.R_OK) else "write"
        found.append(f"{who} may not {what} {ledger} ({_describe(ledger)})")
    missing = []
    for suffix in COMPANIONS:
        companion = ledger.with_name(ledger.name + suffix)
        if os.path.lexists(companion):
            if not can(companion, os.R_OK | os.W_OK):
                found.append(
                    f"{who} may not write {companion} ({_describe(companion)}; made by "
                    "another user? it must belong to the daemon's user)"
                )
        else:
            missing.append(companion.name)
    folder = ledger.parent
    if missing and not can(folder, os.W_OK | os.X_OK):
        found.append(
            f"{who} may not create files in {folder} ({_describe(folder)}), where the ledger "
            f"needs {', '.join(missing)}"
        )
    return found


def problems_as(ledger: Path, user: pwd.struct_passwd) -> list[str]:
    """:func:`problems_here` for another user, asked in a child that becomes that user.

    Only root may do this (PermissionError otherwise). The child never executes anything:
    it sets its groups, gid and uid, asks the kernel, writes the answer and exits.
    """
    who = f"user {user.pw_name}"
    if os.geteuid() == user.pw_uid:
        return problems_here(ledger, who)
    if os.geteuid() != 0:
        raise PermissionError("only root can check the ledger as another user")
    groups = os.getgrouplist(user.pw_name, user.pw_gid)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become the user, ask, report, exit without cleanup
        status = 0
        try:
            os.close(read)
            os.setgroups(groups)
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            answer = json.dumps(problems_here(ledger, who)).encode()
            while answer:
                answer = answer[os.write(write, answer) :]
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or not chunks:
        raise OSError(f"could not check the ledger's files as user {user.pw_name}")
    answer = json.loads(b"".join(chunks))
    return [str(line) for line in answer]
