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
from progressived.ledger import LedgerError
from progressived.ledger.store import connect_readonly
from progressived.settings import DaemonConfig


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
    try:
        conn = connect_readonly(path)
    except LedgerError as exc:
        if not _readable(path):
            return [Finding("ledger.path", f"{exc} (run as the daemon's user)", False, Exit.OK)]
        missing = "never initialised" in str(exc)
        status = Exit.LEDGER_MISSING if missing else Exit.LEDGER_MISMATCH
        return [Finding("ledger.path", str(exc), error=True, status=status)]
    try:
        table = dict(conn.execute("SELECT key, value FROM meta").fetchall()).get("table_id")
    except sqlite3.Error as exc:
        return [Finding("ledger.path", f"{path}: not a ledger: {exc}", True, Exit.LEDGER_MISMATCH)]
    finally:
        conn.close()
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
