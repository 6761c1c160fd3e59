"""``progressived link``, and ``init`` / ``check-config`` / ``self-check`` of a link's file.

A configuration file with a ``[link]`` section (and no ``[table]``) is a link controller's
(docs/link.md); the same verbs work on it. Expected faults end with one line and the exit
codes of docs/operations.md: a bad file 2, no ledger 3, another ledger 4.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from progressived import __version__
from progressived.cli import preflight
from progressived.cli.common import Exit, ledger_status, print_config_error
from progressived.config.table import ConfigError, read_toml
from progressived.core.money import display
from progressived.daemon.selfcheck import run_selfcheck
from progressived.ledger import LedgerError
from progressived.ledger.audit_copy import readable
from progressived.link.runtime.config import LinkConfig, is_link_config, load_link_config
from progressived.runtime import logs
from progressived.runtime.clock import utc_now
from progressived.runtime.config_files import PasswordFileError
from progressived.runtime.control import control_socket_problem
from progressived.runtime.listen import ListenError
from progressived.storage.location import shown

if TYPE_CHECKING:
    from progressived.link.store.ledger import LinkLedger


def is_link_file(path: Path) -> bool:
    """Whether ``path`` is a link controller's configuration (False if unreadable: the
    table loader then reports why)."""
    try:
        return is_link_config(read_toml(path))
    except ConfigError:
        return False


def is_table_file(path: Path) -> bool:
    """Whether ``path`` is a table's configuration (a ``[table]`` section)."""
    try:
        return "table" in read_toml(path)
    except ConfigError:
        return False


def load(path: Path, prog: str = "progressived") -> LinkConfig | None:
    try:
        return load_link_config(path)
    except ConfigError as exc:
        print_config_error(prog, exc)
        return None


def link_ledger_class() -> type[LinkLedger]:
    """``progressived.link.store.ledger.LinkLedger``, imported when first needed (the table's
    commands load this module too)."""
    from progressived.link.store.ledger import LinkLedger  # noqa: PLC0415

    return LinkLedger


def opener(config: LinkConfig, *, lease: bool = True) -> Callable[[], LinkLedger]:
    """How the controller opens its ledger: a file as before; a database under a lease of
    ``[ledger] lease_s`` held as ``[ledger] holder`` (default: this host's name, so a
    controller restarted on the same machine takes its lease back at once, fencing the
    process it replaces)."""
    ledger = config.ledger
    cls = link_ledger_class()
    holder = ledger.lease_holder() if lease else None

    def open_ledger() -> LinkLedger:
        return cls.open(
            ledger.location,
            config.params,
            holder=holder,
            lease_s=ledger.lease_s,
            password=ledger.password(),
        )

    return open_ledger


def _status(exc: LedgerError) -> int:
    return int(ledger_status(exc))


def run(path: Path, *, check: bool = False, standby: bool = True) -> int:
    """Run the link controller (or, with ``check``, replay its ledger read-only, and exit).
    ``standby``: a database ledger leased to another controller is waited for (docs/link.md,
    "The standby controller and two brokers"); off, it is exit 5 as before.

    Refuses with ``check-config``'s statuses first: the ledger (missing 3, another's or
    not a ledger 4, not writable 5) and the control group (2).
    """
    if is_table_file(path):
        path = Path(os.path.abspath(path))
        print(
            f"progressived link: {path}: this is a table's configuration ([table]): run "
            f"`progressived run --config {path}`",
            file=sys.stderr,
        )
        return Exit.USAGE
    if (config := load(path)) is None:
        return Exit.USAGE
    found = preflight.check_link(config)
    if (status := preflight.refuse("progressived link", config.source, found)) is not None:
        return status
    if check:
        try:
            if config.ledger.url is None:  # a file: read it untouched, no lock (docs)
                ledger = link_ledger_class().replay_readonly(config.ledger.path, config.params)
            else:  # a database: read in its own transaction, without the lease
                ledger = opener(config, lease=False)()
        except LedgerError as exc:
            print(f"progressived link: {exc}", file=sys.stderr)
            return _status(exc)
        head = ledger.head
        ledger.close()
        print(f"{config.source}: ok (link {config.params.link_id}, ledger head {head.seq})")
        return Exit.OK
    if (why := control_socket_problem(config.control.socket)) is not None:
        print(f"progressived link: {config.source}: control.socket: {why}", file=sys.stderr)
        return Exit.USAGE
    from progressived.link.runtime.controller import LinkController  # noqa: PLC0415 - heavy

    logs.configure(config.log.format, config.log.level)
    controller = LinkController(config, opener(config), standby=standby)
    try:
        status = asyncio.run(controller.run())
    except LedgerError as exc:  # from opening the ledger: nothing was started
        print(f"progressived link: {exc}", file=sys.stderr)
        return _status(exc)
    except ListenError as exc:  # a port or the control socket is taken: nothing started
        print(f"progressived link: {exc}", file=sys.stderr)
        return Exit.CANNOT_LISTEN
    except PasswordFileError as exc:  # [mqtt] password_file, read at start
        print(f"progressived link: {config.source}: mqtt.password_file: {exc}", file=sys.stderr)
        return Exit.USAGE
    if status == Exit.INTERRUPTED:
        print("progressived: interrupted", file=sys.stderr)  # as the Ctrl-C guard says it
    return status


def check_config(path: Path, *, file_only: bool, user: pwd.struct_passwd | None = None) -> int:
    try:
        config = load_link_config(path)
    except ConfigError as exc:
        print_config_error("progressived", exc)
        return Exit.USAGE
    findings = [] if file_only else preflight.check_link(config, user)
    meters = ", ".join(m.id for m in config.params.meters)
    ok = f"ok (link {config.params.link_id}, meters {meters})"
    return preflight.report(findings, config.source, ok)


def init(config: LinkConfig) -> int:
    """Create the link's ledger (refuses an existing file: exit 6)."""
    at = utc_now()
    try:
        link_ledger_class().create(
            config.ledger.location,
            config.params,
            at=at,
            software=f"progressived {__version__}",
            password=config.ledger.password(),
        )
    except LedgerError as exc:
        print(f"progressived init: {exc}", file=sys.stderr)
        return _status(exc)
    print(
        f"progressived init: created link ledger {shown(config.ledger.location)} for link "
        f"{config.params.link_id} (meters "
        f"{', '.join(f'{m.id} seed {display(m.seed)}' for m in config.params.meters)}; "
        f"tables {', '.join(sorted(config.params.tables))}) at {at}"
    )
    return Exit.OK


def self_check(config: LinkConfig) -> int:
    findings = preflight.link_ledger(config)
    if (status := preflight.refuse("progressived self-check", config.source, findings)) is not None:
        return status
    try:
        with readable(config.ledger.location) as ledger_path:
            result = run_selfcheck(
                ledger_path=ledger_path,
                config_path=config.source,
                paytable_path=config.paytables[0] if config.paytables else None,
                expected_software=config.selfcheck.software_sha256,
            )
    except LedgerError as exc:
        print(f"progressived self-check: {exc}", file=sys.stderr)
        return _status(exc)
    print(json.dumps({"ok": result.ok, "problems": result.problems, **result.detail}, indent=2))
    return Exit.OK if result.ok else Exit.FAILED
