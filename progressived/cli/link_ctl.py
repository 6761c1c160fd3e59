"""``progressivectl link reconcile``: the link's ledger against its tables' ledgers.

Exit status: 0 when every ledger agrees (``differences`` empty), 1 when a difference was
found, 3 a ledger is missing (or an empty file), 4 a file is not a ledger or the wrong kind
(a table ledger given as ``--link-db``, or the other way round). Read-only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from progressived.cli.common import ledger_status
from progressived.ledger.errors import LedgerError, LedgerMismatch, LedgerMissing
from progressived.storage.location import parse, shown


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "link", help="linked progressive: reconcile the ledgers", description="The link."
    )
    lsub = p.add_subparsers(dest="link_command", required=True, metavar="SUBCOMMAND")
    r: argparse.ArgumentParser = lsub.add_parser(
        "reconcile",
        help="compare the link's ledger with its tables' ledgers",
        description="Compare the link controller's ledger with each table's ledger: the same "
        "message ids and contents, the same results, contributions and awards to the unit, "
        "every witnessed head in the other side's chain, every ledger verifies. Exit 0 when "
        "all agree; 1 when a difference was found; 3 a ledger is missing; 4 a file is not a "
        "ledger of the right kind.",
    )
    r.add_argument(
        "--link-db",
        type=parse,
        required=True,
        metavar="PATH",
        help="the link ledger: a file, or a postgresql:// URL",
    )
    r.add_argument(
        "--table-db",
        type=Path,
        action="append",
        required=True,
        metavar="PATH",
        help="a member table's ledger (repeat for each table)",
    )
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.set_defaults(handler=run_reconcile)


def run_reconcile(args: argparse.Namespace) -> int:
    from progressived.ledger.audit_copy import readable  # noqa: PLC0415
    from progressived.link.store.reconcile import Unusable, reconcile  # noqa: PLC0415

    try:
        with readable(args.link_db) as link_db:
            report = reconcile(link_db, list(args.table_db), link_name=shown(args.link_db))
    except LedgerError as exc:  # a database that cannot be read (or holds no ledger)
        print(f"progressivectl link reconcile: {exc}", file=sys.stderr)
        return int(ledger_status(exc)) if isinstance(exc, LedgerMissing | LedgerMismatch) else 2
    except Unusable as exc:
        print(f"progressivectl link reconcile: {exc}", file=sys.stderr)
        return exc.status
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(report.lines()))
    return 1 if report.differences else 0
