"""``ledger verify``'s modes: the full check, ``--since-verified``, ``--head``, the sidecar.

The full check is the default and what an audit runs. ``--since-verified`` checks only the
rows after the head a previous check recorded in ``LEDGER.verified``; with no usable sidecar
it says so on one line and runs the full check. After a check that found no problem the
head it verified is recorded (``--no-record``: not), so the next quick check starts there.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from progressived.ledger.audit_copy import readable
from progressived.ledger.heads import (
    SidecarUnusable,
    parse_head,
    read_verified,
    record_verified,
    verified_from,
)
from progressived.ledger.readonly import ledger_kind
from progressived.ledger.verify import VerifyReport, verify
from progressived.ledger.verify_since import verify_since
from progressived.link.store import audit as link_audit
from progressived.runtime.clock import utc_now
from progressived.storage.location import is_url


def head_arg(text: str) -> object:
    """argparse ``type`` for ``--head SEQ:HASH``."""
    try:
        return parse_head(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(v: argparse.ArgumentParser) -> None:
    v.add_argument(
        "--head",
        type=head_arg,
        action="append",
        default=[],
        metavar="SEQ:HASH",
        help="a head recorded elsewhere (the MQTT status, a daily report): the chain must "
        "pass through row SEQ with this hash (repeatable)",
    )
    mode = v.add_mutually_exclusive_group()
    mode.add_argument(
        "--full",
        action="store_true",
        help="check every row (the default; what an audit runs)",
    )
    mode.add_argument(
        "--since-verified",
        action="store_true",
        help="check only the rows after the head recorded by the last check that passed "
        "(PATH.verified); without one, check in full",
    )
    v.add_argument(
        "--no-record",
        action="store_true",
        help="do not record the verified head in PATH.verified",
    )


def run(args: argparse.Namespace, show: Callable[[int, int], None] | None) -> VerifyReport:
    """The check the flags ask for; records the verified head when it passed."""
    if is_url(args.db):
        return _run_database(args, show)
    report: VerifyReport | None = None
    if args.since_verified:
        if ledger_kind(args.db) == "link":
            print(
                "ledger verify: a link ledger is replayed in full: checking in full",
                file=sys.stderr,
            )
        elif args.deep:
            print("ledger verify: --deep replays every row: checking in full", file=sys.stderr)
        else:
            try:
                recorded = read_verified(args.db)
            except SidecarUnusable as why:
                print(f"ledger verify: {why}: checking in full", file=sys.stderr)
            else:
                report = verify_since(args.db, recorded, heads=args.head)
    if report is None:
        report = verify(
            args.db,
            replay=args.deep,
            integrity=not args.no_integrity,
            progress=show,
            heads=args.head,
            kinds=link_audit.KINDS,
        )
    if report.ok and not args.no_record:
        _record(args.db, report)
    return report


def _run_database(
    args: argparse.Namespace, show: Callable[[int, int], None] | None
) -> VerifyReport:
    """A link ledger in PostgreSQL: the full check, on a consistent copy of its rows
    (:mod:`progressived.ledger.audit_copy`). Its verified head is not recorded: there is no
    file beside a database (and a link ledger is checked in full anyway)."""
    if args.since_verified:
        print("ledger verify: a link ledger is replayed in full: checking in full", file=sys.stderr)
    with readable(args.db) as path:
        return verify(
            path,
            replay=args.deep,
            integrity=False,  # the copy's; the database's own is pg_amcheck
            progress=show,
            heads=args.head,
            kinds=link_audit.KINDS,
        )


def _record(db: Path, report: VerifyReport) -> None:
    verified = verified_from(
        report.head_seq, report.head_hash, report.table_id, utc_now(), report.mode, report.balances
    )
    try:
        record_verified(db, verified)
    except OSError as exc:
        print(
            f"ledger verify: the verified head was not recorded: {exc.strerror or exc}",
            file=sys.stderr,
        )
