"""What a valid configuration still needs from this machine before ``run`` can start.

``check-config`` reports these beside the file's own checks and ``run`` refuses on the
errors, each as ``FILE: key: reason``: the ledger directory and the ledger (a missing
ledger is never an empty one: ``progressived init`` creates it), the ledger's table, and
the control socket's group.
"""

from __future__ import annotations

import grp
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from progressived.cli.common import Exit
from progressived.config.daemon import DaemonConfig
from progressived.ledger import LedgerError, schema


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem; ``error`` ones make ``run`` refuse with ``status``."""

    key: str
    reason: str
    error: bool
    status: Exit

    def line(self, source: Path) -> str:
        return f"{source}: {self.key}: {'' if self.error else 'warning: '}{self.reason}"


def control_group(config: DaemonConfig) -> list[Finding]:
    group = config.control.group
    if group is None:
        return [
            Finding(
                "control.group",
                "not set: only root and the daemon's own user can use the control socket",
                error=False,
                status=Exit.OK,
            )
        ]
    try:
        grp.getgrnam(group)
    except KeyError:
        return [
            Finding(
                "control.group",
                f"no group {group!r} on this machine (create it with groupadd, or fix the key)",
                error=True,
                status=Exit.USAGE,
            )
        ]
    return []


def ledger(config: DaemonConfig) -> list[Finding]:
    path = config.ledger.path
    init = f"initialise a new table's ledger with `progressived init --config {config.source}`"
    if not path.parent.is_dir():
        return [
            Finding(
                "ledger.path",
                f"the ledger directory {path.parent} does not exist (a typo? else create it, "
                f"then {init})",
                error=True,
                status=Exit.LEDGER_MISSING,
            )
        ]
    if not path.exists():
        return [
            Finding(
                "ledger.path",
                f"no ledger at {path}: a missing ledger is not an empty one; fix the path, "
                f"or {init}",
                error=True,
                status=Exit.LEDGER_MISSING,
            )
        ]
    if not _readable(path):
        why = f"{path}: cannot read it as this user (run the check as the daemon's user)"
        return [Finding("ledger.path", why, error=False, status=Exit.OK)]
    try:
        table = ledger_table(path)
    except LedgerError as exc:
        missing = "never initialised" in str(exc)
        status = Exit.LEDGER_MISSING if missing else Exit.LEDGER_MISMATCH
        return [Finding("ledger.path", str(exc), error=True, status=status)]
    except sqlite3.Error as exc:  # e.g. read while a running daemon checkpoints
        why = f"{path}: cannot read the ledger's table now: {exc}"
        return [Finding("ledger.path", why, error=False, status=Exit.OK)]
    if table != config.params.table_id:
        return [
            Finding(
                "ledger.path",
                f"{path} is table {table!r}'s ledger, not {config.params.table_id!r}'s "
                f"(table.id {json.dumps(config.params.table_id)})",
                error=True,
                status=Exit.LEDGER_MISMATCH,
            )
        ]
    return []


def ledger_table(path: Path) -> str | None:
    """The table a ledger file belongs to, read without writing anything beside it.

    ``immutable=1``: an ordinary read-only connection to a WAL ledger creates ``-wal`` and
    ``-shm`` files, which, made by root (``check-config`` after an upgrade), the daemon's
    user could not open afterwards. The table id is written once, when the ledger is made,
    and ``init`` closes (checkpoints) the ledger, so the main file holds it.
    """
    uri = f"file:{path.resolve().as_posix()}?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True)
    try:
        version = schema.file_version(conn)
        schema.check_supported(version)
        if version == 0:
            raise LedgerError(
                f"{path}: an empty file: the ledger was never initialised (for a new table: "
                "remove the empty file, then `progressived init`)"
            )
        found = conn.execute("SELECT value FROM meta WHERE key = 'table_id'").fetchone()
    finally:
        conn.close()
    return None if found is None else str(found[0])


def _readable(path: Path) -> bool:
    try:
        with path.open("rb"):
            return True
    except OSError:
        return False


def check(config: DaemonConfig) -> list[Finding]:
    """Every finding, errors first."""
    found = ledger(config) + control_group(config)
    return sorted(found, key=lambda f: not f.error)
