"""What ``progressived``'s commands do: ``run``, ``link``, ``init``, ``check-config``,
``self-check``.

Imported by :mod:`progressived.cli.daemon` only once the command line is parsed and a Ctrl-C
is handled, so that even an interrupt while these (heavy) imports load ends in one line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pwd
import sys
from pathlib import Path

from progressived import __version__
from progressived.cli import link_cmd, preflight
from progressived.cli.common import Exit, ledger_status
from progressived.config.daemon import DaemonConfig, load_daemon_config
from progressived.config.table import ConfigError
from progressived.core.money import display
from progressived.daemon.selfcheck import run_selfcheck
from progressived.daemon.service import run_daemon
from progressived.engine import accounts
from progressived.ledger import (
    Ledger,
    LedgerError,
)
from progressived.link.runtime.config import load_link_config
from progressived.link.runtime.pairing import pair_problems
from progressived.runtime import logs
from progressived.runtime.clock import utc_now
from progressived.runtime.control import control_socket_problem


def _load(path: Path) -> DaemonConfig | None:
    """The validated configuration, or ``None`` after printing why it is not valid."""
    try:
        return load_daemon_config(path)
    except ConfigError as exc:
        print(f"progressived: {exc}", file=sys.stderr)
        return None


def check_config(path: Path, *, file_only: bool, link: Path | None = None) -> int:
    if link_cmd.is_link_file(path):
        if link is not None:
            why = "--link checks a table's file, not a link's"
            print(f"progressived: {path}: {why}", file=sys.stderr)
            return Exit.USAGE
        return link_cmd.check_config(path, file_only=file_only)
    if (config := _load(path)) is None:
        return Exit.USAGE
    if link is not None and not _pairs_with(config, link):
        return Exit.USAGE
    findings = [] if file_only else preflight.check(config)
    for finding in findings:
        print(finding.line(config.source), file=sys.stderr)
    errors = [f for f in findings if f.error]
    if errors:
        return errors[0].status
    print(f"{path}: ok ({config.params.table_id}, paytable {config.params.paytable.id})")
    return Exit.OK


def _pairs_with(config: DaemonConfig, link: Path) -> bool:
    """The table's file against its link controller's (progressived.link.runtime.pairing)."""
    try:
        problems = pair_problems(config, load_link_config(link))
    except ConfigError as exc:
        print(f"progressived: {exc}", file=sys.stderr)
        return False
    for problem in problems:
        print(f"progressived: {config.source}: {problem}", file=sys.stderr)
    return not problems


def run(config: DaemonConfig) -> int:
    """Refuse what would stop the daemon half-started (the control group), then run."""
    for finding in preflight.control_group(config):
        if finding.error:
            print(f"progressived: {finding.line(config.source)}", file=sys.stderr)
            return finding.status
    if (why := control_socket_problem(config.control.socket)) is not None:
        print(f"progressived: {config.source}: control.socket: {why}", file=sys.stderr)
        return Exit.USAGE
    logs.configure(config.log.format, config.log.level)
    try:
        return asyncio.run(run_daemon(config))
    except LedgerError as exc:  # from opening the ledger: nothing was started
        print(f"progressived: {exc}", file=sys.stderr)
        return ledger_status(exc)


def init(config: DaemonConfig, operator: str | None) -> int:
    """Create the table's ledger, journaling who (operator id, OS user) and when."""
    user = pwd.getpwuid(os.getuid()).pw_name
    who = {"os_user": user}
    if operator:
        who["operator"] = operator
    if (sudo := os.environ.get("SUDO_USER")) and sudo != user:
        who["sudo_user"] = sudo
    at = utc_now()
    path = config.ledger.path
    try:
        with Ledger.create(
            path, config.params, at=at, software=f"progressived {__version__}", created_by=who
        ) as led:
            meters = ", ".join(
                f"{meter_id} {display(led.state.balance(accounts.meter(meter_id)))}"
                for meter_id in config.params.meter_ids
            )
    except LedgerError as exc:
        print(f"progressived init: {exc}", file=sys.stderr)
        return ledger_status(exc)
    by = f"operator {operator}, " if operator else ""
    print(
        f"progressived init: created ledger {path} for table {config.params.table_id} "
        f"(paytable {config.params.paytable.id}; meters {meters}) at {at} by {by}OS user {user}"
    )
    return Exit.OK


def self_check(config: DaemonConfig) -> int:
    for finding in preflight.ledger(config):
        if finding.error:
            print(f"progressived self-check: {finding.line(config.source)}", file=sys.stderr)
            return finding.status
    paytable = Path(config.params.paytable.source)
    result = run_selfcheck(
        ledger_path=config.ledger.path,
        config_path=config.source,
        paytable_path=paytable if paytable.is_file() else None,
        expected_software=config.selfcheck.software_sha256,
    )
    print(json.dumps({"ok": result.ok, "problems": result.problems, **result.detail}, indent=2))
    return Exit.OK if result.ok else Exit.FAILED


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "check-config":
        return check_config(args.config, file_only=args.file_only, link=args.link)
    if args.command == "completion":
        return int(args.handler(args))
    if args.command == "demo" and args.tables != 1:
        if args.tables < 2:
            why = "--tables wants N >= 2 (1 is the single table)"
            print(f"progressived demo: {why}", file=sys.stderr)
            return Exit.USAGE
        from progressived.demo.link_script import run_link_demo  # noqa: PLC0415 - the demo's imports

        return run_link_demo(
            tables=args.tables, headless=args.headless, workdir=args.workdir, keep=args.keep
        )
    if args.command == "demo":
        from progressived.demo.table import run_demo  # noqa: PLC0415 - only the demo needs its imports

        return run_demo(
            headless=args.headless, rounds=args.rounds, workdir=args.workdir, keep=args.keep
        )
    if args.command == "link":
        return link_cmd.run(args.config, check=args.check)
    if args.command in ("init", "self-check") and link_cmd.is_link_file(args.config):
        if (link := link_cmd.load(args.config)) is None:
            return Exit.USAGE
        return link_cmd.init(link) if args.command == "init" else link_cmd.self_check(link)
    if (config := _load(args.config)) is None:
        return Exit.USAGE
    if args.command == "run":
        return run(config)
    if args.command == "init":
        return init(config, args.operator)
    if args.command == "self-check":
        return self_check(config)
    return Exit.USAGE
