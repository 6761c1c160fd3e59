"""``progressivectl ledger verify|export``, ``progressivectl meters`` and ``hits``.

All read the ledger read-only (a ``mode=ro`` connection in WAL mode), so they are safe to
run while the daemon writes. ``--db`` is a file or, for a link ledger in PostgreSQL, a
``postgresql://`` URL (read in one read-only transaction: :mod:`progressived.ledger.audit_copy`).
Exit status: 0 success, 1 verify found a problem, 2 the file cannot be read or is not a
ledger.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from progressived.cli import restore_cmd, verify_modes
from progressived.cli.common import progress
from progressived.ledger import LedgerError, reports
from progressived.ledger.audit_copy import readable
from progressived.ledger.readonly import ledger_kind
from progressived.link.store import reports as link_reports
from progressived.storage.location import parse, shown

DB_HELP = "the ledger file, or a postgresql:// URL (a link ledger in a database)"


def register(sub: Any) -> None:
    """``ledger`` with its ``verify`` and ``export`` subcommands."""
    p: argparse.ArgumentParser = sub.add_parser(
        "ledger", help="verify or export a ledger", description="Audit a table's ledger."
    )
    lsub = p.add_subparsers(dest="ledger_command", required=True, metavar="SUBCOMMAND")
    v: argparse.ArgumentParser = lsub.add_parser(
        "verify",
        help="check the hash chain, postings, balances and snapshots",
        description="Check the hash chain, that postings balance, that balances equal the "
        "replay of the postings, the accounting identity, meta's head, each snapshot's hash "
        "and the latest snapshot's balances (--deep: every snapshot's whole state; "
        "--since-verified: only the rows after the last verified head; --head: against "
        "heads recorded elsewhere). Exit 0 when all hold; otherwise 1, naming the first bad "
        "row or the head that does not match.",
    )
    v.add_argument("--db", type=parse, required=True, metavar="PATH", help=DB_HELP)
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.add_argument(
        "--deep",
        action="store_true",
        help="also replay every event through the engine and compare each recovery snapshot "
        "with the replayed state (minutes on a ledger of millions of events)",
    )
    v.add_argument("--no-replay", action="store_true", help=argparse.SUPPRESS)  # the default now
    v.add_argument("--no-integrity", action="store_true", help="skip PRAGMA integrity_check")
    verify_modes.add_arguments(v)
    v.set_defaults(handler=run_verify)
    e: argparse.ArgumentParser = lsub.add_parser(
        "export",
        help="export journal rows as CSV or JSON",
        description="Write the journal rows (with their hashes) to standard output.",
    )
    e.add_argument("--db", type=parse, required=True, metavar="PATH", help=DB_HELP)
    e.add_argument("--format", choices=("csv", "json"), required=True)
    e.add_argument(
        "--since", type=int, default=0, metavar="SEQ", help="only rows after row SEQ (default 0)"
    )
    e.add_argument("--output", type=Path, metavar="FILE", help="write here, not to stdout")
    e.set_defaults(handler=run_export)
    restore_cmd.register(lsub)  # a dead board's ledger from the archive (docs/archive.md)


def register_meters(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "meters",
        help="meter values, progressive in, hits and wins per hand, amounts paid",
        description="The meters of a table, computed from its ledger.",
    )
    p.add_argument("--db", type=parse, required=True, metavar="PATH", help=DB_HELP)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=run_meters)


def register_hits(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "hits",
        help="the last meter hits",
        description="The last meter hits: time, table, seat, hand, amount, the meter before "
        "and after, who confirmed. Newest first.",
    )
    p.add_argument("--db", type=parse, required=True, metavar="PATH", help=DB_HELP)
    p.add_argument("--last", type=int, default=25, metavar="N", help="how many (default 25)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=run_hits)


def _fail(command: str, exc: Exception) -> int:
    print(f"progressivectl {command}: {exc}", file=sys.stderr)
    return 2


def run_verify(args: argparse.Namespace) -> int:
    try:
        with progress("verify", " rows") as show:
            report = verify_modes.run(args, show)
    except LedgerError as exc:
        return _fail("ledger verify", exc)
    args.db = shown(args.db)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    elif report.ok:
        since = f" (since-verified: rows after {report.checked_from})" * (report.mode != "full")
        link = report.ledger_kind == "link"
        print(
            f"ledger {args.db}: OK{since}: {report.ledger_kind} {report.table_id}, "
            f"{report.rows} rows, {report.snapshots} snapshots; head row {report.head_seq} "
            f"hash {report.head_hash}; postings balance, balances equal the postings, the "
            + (
                "identity holds per linked meter, every result replays"
                if link
                else "identity holds"
            )
        )
    else:
        first = report.problems[0]
        where = f"row {first.seq}" if first.seq is not None else "the file"
        print(f"ledger {args.db}: FAILED at {where}: {first.message}")
        for problem in report.problems[1:10]:
            print(f"  also {problem}")
        if len(report.problems) > 10:
            print(f"  ... {len(report.problems) - 10} more")
    return 0 if report.ok else 1


def run_export(args: argparse.Namespace) -> int:
    try:
        with readable(args.db) as db:
            if args.output is not None:
                with args.output.open("w", encoding="utf-8", newline="") as out:
                    reports.export(db, out, args.format, args.since)
            else:
                reports.export(db, sys.stdout, args.format, args.since)
    except BrokenPipeError:
        raise  # the reader went away (`| head`): progressivectl's guard ends quietly, 141
    except (LedgerError, OSError) as exc:
        return _fail("ledger export", exc)
    return 0


def run_meters(args: argparse.Namespace) -> int:
    try:
        with readable(args.db) as db:
            if ledger_kind(db) == "link":
                report = link_reports.meters(db)
                text = link_reports.render_meters
            else:
                report, text = reports.meters(db), reports.render_meters
    except LedgerError as exc:
        return _fail("meters", exc)
    print(json.dumps(report, indent=2) if args.json else text(report))
    return 0


def run_hits(args: argparse.Namespace) -> int:
    if args.last < 1:
        return _fail("hits", ValueError("--last must be at least 1"))
    try:
        with readable(args.db) as db:
            if ledger_kind(db) == "link":
                rows, text = link_reports.hits(db, args.last), link_reports.render_hits
            else:
                rows, text = reports.hits(db, args.last), reports.render_hits
    except LedgerError as exc:
        return _fail("hits", exc)
    print(json.dumps(rows, indent=2) if args.json else text(rows))
    return 0
