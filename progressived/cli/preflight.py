"""What a valid configuration still needs from this machine before ``run`` (or ``link``)
can start, checked without creating or changing anything.

``check-config`` reports these beside the file's own checks, and ``run``, ``link`` and
``self-check`` refuse on the errors with the same exit status, each as ``FILE: key:
reason``: the ledger directory and the ledger (a missing ledger is never an empty one:
``progressived init`` creates it), that it is a progressived ledger of the right kind and
owner (this table's, or this link's), that the user may open it for writing (the ledger,
its ``-wal``/``-shm`` and ``.lock`` files, or the directory to create them in), that the
configuration abandons no local meter's money (:mod:`progressived.ledger.conversion`),
and the control socket's group. Reading the ledger leaves nothing beside it
(:func:`progressived.ledger.readonly.connect_untouched`).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from progressived.cli import access
from progressived.cli.common import Exit, ledger_status
from progressived.ledger import LedgerError, conversion
from progressived.ledger.readonly import read_meta
from progressived.storage.sqlite_version import sqlite_too_old

if TYPE_CHECKING:
    from progressived.config.daemon import DaemonConfig
    from progressived.link.runtime.config import LinkConfig


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem; ``error`` ones make ``run`` refuse with ``status``."""

    key: str
    reason: str
    error: bool
    status: Exit

    def line(self, source: Path) -> str:
        return f"{source}: {self.key}: {'' if self.error else 'warning: '}{self.reason}"


@dataclass(frozen=True, slots=True)
class Owner:
    """Whose ledger the configuration expects: a table's (``table_id``) or a link's."""

    kind: str  # "table" or "link"
    ident: str
    key: str  # the configuration key naming it: table.id or link.id


def _error(reason: str, status: Exit) -> Finding:
    return Finding("ledger.path", reason, error=True, status=status)


def control_group(group: str | None) -> list[Finding]:
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


def ledger_file(
    path: Path, owner: Owner, init: str, user: pwd.struct_passwd | None = None
) -> list[Finding]:
    """Every problem ``run`` would meet opening the ledger at ``path`` for ``owner``.

    ``user``: check access as that user (root only) instead of as this process.
    """
    if (too_old := sqlite_too_old()) is not None:  # nor could it read the file's schema
        return [Finding("sqlite", too_old, error=True, status=Exit.MISSING_REQUIREMENT)]
    if not path.parent.is_dir():
        return [
            _error(
                f"the ledger directory {path.parent} does not exist (a typo? else create it, "
                f"then {init})",
                Exit.LEDGER_MISSING,
            )
        ]
    if not path.exists():
        what = "ledger" if owner.kind == "table" else f"{owner.kind} ledger"
        return [
            _error(
                f"no {what} at {path}: a missing ledger is not an empty one; fix the path, "
                f"or {init}",
                Exit.LEDGER_MISSING,
            )
        ]
    try:
        if user is None:
            who = pwd.getpwuid(os.geteuid()).pw_name
            denied = access.problems_here(path, f"user {who}")
        else:
            denied = access.problems_as(path, user)
    except OSError as exc:
        return [_error(f"cannot check access to {path}: {exc}", Exit.LEDGER_UNAVAILABLE)]
    found = [_error(f"{why}: run would fail to open it", Exit.LEDGER_UNAVAILABLE) for why in denied]
    if user is None and not os.access(path, os.R_OK, effective_ids=True):
        return found  # nor can its content be read here
    try:
        meta = read_meta(path)
    except LedgerError as exc:
        return [_error(str(exc), ledger_status(exc)), *found]
    if (problem := not_the_owners(path, meta, owner)) is not None:
        return [_error(problem, Exit.LEDGER_MISMATCH), *found]
    return found


def not_the_owners(path: Path, meta: Mapping[str, str], owner: Owner) -> str | None:
    """Why the ledger is not ``owner``'s (another table's or link's, or the other kind)."""
    kind = meta.get("ledger_kind", "table")
    found = meta.get("table_id") if kind == "table" else meta.get("link_id")
    if kind != owner.kind:
        return (
            f"{path} is the ledger of {kind} {found!r}, not of {owner.kind} "
            f"{owner.ident!r} ({owner.key} {json.dumps(owner.ident)})"
        )
    if found != owner.ident:
        return (
            f"{path} belongs to {kind} {found!r}, not {owner.ident!r} "
            f"({owner.key} {json.dumps(owner.ident)})"
        )
    return None


def table_ledger(config: DaemonConfig, user: pwd.struct_passwd | None = None) -> list[Finding]:
    init = f"initialise a new table's ledger with `progressived init --config {config.source}`"
    owner = Owner("table", config.params.table_id, "table.id")
    found = ledger_file(config.ledger.path, owner, init, user)
    if any(f.error for f in found) or not os.access(config.ledger.path, os.R_OK):
        return found
    return conversion_refused(config) + found


def conversion_refused(config: DaemonConfig) -> list[Finding]:
    """The ledger's local meters against the configuration's: a meter that holds money and
    that the configuration makes linked or drops is refused with status 4
    (:mod:`progressived.ledger.conversion`), before ``run`` journals anything."""
    try:
        conversion.check_file(config.ledger.path, config.params)
    except conversion.ConversionRefused as exc:
        return [Finding("progressive.meters", str(exc), error=True, status=Exit.LEDGER_MISMATCH)]
    except LedgerError as exc:
        return [_error(str(exc), ledger_status(exc))]
    return []


def link_ledger(config: LinkConfig, user: pwd.struct_passwd | None = None) -> list[Finding]:
    """The link ledger's file, as for a table's; a ledger in a database ([ledger] url) is
    checked when it is opened (it refuses the same things there)."""
    if config.ledger.url is not None:
        return []
    init = f"create a new link's ledger with `progressived init --config {config.source}`"
    owner = Owner("link", config.params.link_id, "link.id")
    return ledger_file(config.ledger.path, owner, init, user)


def errors_first(found: list[Finding]) -> list[Finding]:
    return sorted(found, key=lambda f: not f.error)


def check(config: DaemonConfig, user: pwd.struct_passwd | None = None) -> list[Finding]:
    """Every finding for a table's configuration, errors first."""
    return errors_first(table_ledger(config, user) + control_group(config.control.group))


def check_link(config: LinkConfig, user: pwd.struct_passwd | None = None) -> list[Finding]:
    """Every finding for a link controller's configuration, errors first."""
    return errors_first(link_ledger(config, user) + control_group(config.control.group))


def report(findings: list[Finding], source: Path, ok: str) -> int:
    """``check-config``'s answer: every finding on stderr; the first error's status."""
    for finding in findings:
        print(finding.line(source), file=sys.stderr)
    errors = [f for f in findings if f.error]
    if errors:
        return errors[0].status
    print(f"{source}: {ok}")
    return Exit.OK


def refuse(prog: str, source: Path, findings: list[Finding]) -> int | None:
    """What ``run`` refuses on: every error as one line; the first error's status."""
    errors = [f for f in findings if f.error]
    for finding in errors:
        print(f"{prog}: {finding.line(source)}", file=sys.stderr)
    return errors[0].status if errors else None
