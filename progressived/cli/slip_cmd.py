"""``progressivectl slip void|print|reprint|show|list`` and ``progressivectl slips``.

``slip void``, ``print`` and ``reprint`` go through the daemon's control socket (the daemon
is the ledger's one writer); the others read the ledger read-only, safe while the daemon
runs. Exit statuses (docs/slips.md, "Commands"): 0 done, 1 the daemon refused or no such
slip, 2 bad usage, an unreadable ledger or no daemon at the socket.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from progressived.cli.control_cmd import DEFAULT_SOCKET, ask_daemon
from progressived.ledger import LedgerError
from progressived.ledger.readonly import ledger_kind
from progressived.ledger.slip_reads import StoredSlip, one, render_csv, render_list, slips
from progressived.ledger.slip_reconcile import reconcile
from progressived.link.store.slip_check import linked_differences
from progressived.printing.pdf import slips_pdf
from progressived.slips.text import DUPLICATE, ORIGINAL, lines

_WHEN = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}(:\d{2}(:\d{2}(\.\d{1,6})?)?)?Z?)?$")


def _when(text: str) -> str:
    """A UTC date or time as the ledger writes them (``2026-11-21``, ``2026-11-21T19:00``)."""
    if not _WHEN.match(text):
        raise argparse.ArgumentTypeError(f"{text!r}: a UTC date or time, e.g. 2026-11-21")
    return text


def _db(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    p.add_argument("--db", type=Path, required=required, metavar="PATH", help="the table's ledger")


def _listing(p: argparse.ArgumentParser, *, db_required: bool = True) -> None:
    _db(p, required=db_required)
    p.add_argument("--from", dest="since", type=_when, metavar="WHEN", help="issued at or after")
    p.add_argument(
        "--to",
        dest="until",
        type=_when,
        metavar="WHEN",
        help="issued up to (a date: its whole day)",
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON")
    fmt.add_argument("--csv", action="store_true", help="print CSV")
    fmt.add_argument(
        "--pdf", type=Path, metavar="FILE", help="write them as one PDF (a page per copy)"
    )
    p.set_defaults(handler=run_list)


def _socket(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--socket", type=Path, default=DEFAULT_SOCKET, help="the daemon's control socket"
    )
    p.add_argument("--json", action="store_true", help="print the daemon's JSON answer")


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "slip",
        help="one payout slip: void (and reissue), print, reprint, show, PDF; list them",
        description="Payout slips (docs/slips.md).",
    )
    ssub = p.add_subparsers(dest="slip_command", required=True, metavar="SUBCOMMAND")
    v: argparse.ArgumentParser = ssub.add_parser(
        "void",
        help="mark a slip VOID (journaled), optionally reissue it under a new serial",
        description="Void a spoiled slip through the daemon: journaled with why and who; "
        "--reissue issues the same award's slip again under the next serial, in the same "
        "transaction. Exit 0 done, 1 refused (unknown or void serial), 2 no daemon.",
    )
    v.add_argument("serial")
    v.add_argument("--reason", required=True, help="why (printed on the VOID, journaled)")
    v.add_argument("--by", required=True, help="who voids it: the preparer's id (journaled)")
    v.add_argument("--reissue", action="store_true", help="issue it again under a new serial")
    _socket(v)
    v.set_defaults(handler=run_control, action="slip-void")
    pr: argparse.ArgumentParser = ssub.add_parser(
        "print",
        help="print a slip's waiting copies now (after the printer is fixed)",
        description="Ask the daemon's slip printer to print the copies of SERIAL still "
        "waiting, now rather than at its next retry. Exit 0 (the copies named), 1 refused "
        "(no printer, nothing waiting), 2 no daemon.",
    )
    pr.add_argument("serial")
    _socket(pr)
    pr.set_defaults(handler=run_control, action="slip-print")
    rp: argparse.ArgumentParser = ssub.add_parser(
        "reprint",
        help="print a slip again, marked REPRINT n (journaled)",
        description="Journal a reprint of SERIAL and print it, marked REPRINT n. Exit 0, 1 "
        "refused (no printer, no such slip), 2 no daemon.",
    )
    rp.add_argument("serial")
    rp.add_argument("--reason", required=True, help="why (journaled)")
    rp.add_argument("--by", required=True, help="who asks for it (journaled)")
    _socket(rp)
    rp.set_defaults(handler=run_control, action="slip-reprint")
    s: argparse.ArgumentParser = ssub.add_parser(
        "show",
        help="a slip as stored (the text of its original, or --json)",
        description="A slip from the ledger: its fields, its status (live or VOID), its row "
        "and hash. Exit 0, 1 when there is no such slip, 2 an unreadable ledger.",
    )
    s.add_argument("serial")
    _db(s)
    s.add_argument("--duplicate", action="store_true", help="the duplicate's text")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(handler=run_show)
    pdf: argparse.ArgumentParser = ssub.add_parser(
        "pdf",
        help="a slip as a PDF (one page per copy)",
        description="Write SERIAL as a PDF: its original and duplicate, one page each (a "
        "VOID slip with its VOID). Exit 0, 1 no such slip, 2 an unreadable ledger or an "
        "unwritable file.",
    )
    pdf.add_argument("serial")
    _db(pdf)
    pdf.add_argument("--output", type=Path, required=True, metavar="FILE", help="the PDF file")
    pdf.set_defaults(handler=run_pdf)
    lst: argparse.ArgumentParser = ssub.add_parser("list", help="slips issued, in serial order")
    _listing(lst)
    every: argparse.ArgumentParser = sub.add_parser(
        "slips",
        help="payout slips issued (from, to) as text, JSON, CSV or PDF; reconcile",
        description="Every slip issued in a period, in serial order, live or VOID; "
        "`slips reconcile`: the slips against the ledger's awards.",
    )
    _listing(every, db_required=False)
    esub = every.add_subparsers(dest="slips_command", metavar="SUBCOMMAND")
    rec: argparse.ArgumentParser = esub.add_parser(
        "reconcile",
        help="every serial accounted for, one live slip per award, amounts per meter",
        description="The accountant's reconciliation over a table's ledger: every serial "
        "accounted for (issued, void, reissued; no gap, none twice), every award of the "
        "period with exactly one live slip of its amount, and per meter the live slips "
        "equal to the meter's decrease for hits, to the cent. Exit 0 when all hold, 1 with "
        "each difference named, 2 an unreadable ledger.",
    )
    _db(rec)
    rec.add_argument("--from", dest="since", type=_when, metavar="WHEN", help="from (UTC)")
    rec.add_argument("--to", dest="until", type=_when, metavar="WHEN", help="up to (UTC)")
    rec.add_argument(
        "--link-db",
        type=Path,
        metavar="PATH",
        help="the link's ledger: a linked table's slips against the claims the link paid",
    )
    rec.add_argument("--json", action="store_true", help="print JSON")
    rec.set_defaults(handler=run_reconcile)


def run_control(args: argparse.Namespace) -> int:
    """``slip void|print|reprint``: one request to the daemon's control socket."""
    payload: dict[str, Any] = {"action": args.action, "serial": args.serial}
    if args.action != "slip-print":
        payload.update(reason=args.reason, operator=args.by)
    if args.action == "slip-void":
        payload["reissue"] = bool(args.reissue)
    if (answer := ask_daemon(args.socket, payload)) is None:
        return 2
    if args.json:
        print(json.dumps(answer, indent=2, sort_keys=True))
    if not answer.get("ok"):
        print(f"progressivectl: refused: {answer.get('error')}", file=sys.stderr)
        return 1
    if not args.json:
        print(_done(args.action, answer))
    return 0


def _done(action: str, answer: dict[str, Any]) -> str:
    if action == "slip-void":
        again = answer.get("reissued_as")
        return f"slip {answer['voided']} voided (journaled)" + (
            f"; reissued as {again}" if again else ""
        )
    if action == "slip-reprint":
        return f"slip {answer['serial']}: REPRINT {answer['reprint']} queued (journaled)"
    return f"slip {answer['serial']}: printing {', '.join(answer['waiting'])}"


def run_show(args: argparse.Namespace) -> int:
    try:
        found = one(args.db, args.serial)
    except LedgerError as exc:
        print(f"progressivectl slip show: {exc}", file=sys.stderr)
        return 2
    if found is None:
        print(f"progressivectl slip show: no slip {args.serial} in {args.db}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(found.to_dict(), indent=2, sort_keys=True))
    else:
        print(_text(found, duplicate=args.duplicate))
    return 0


def _text(found: StoredSlip, *, duplicate: bool) -> str:
    copy = DUPLICATE if duplicate else ORIGINAL
    body = lines(found.slip, found.at, copy, void=found.void)
    return "\n".join([*body, "", f"ledger row {found.seq}, hash {found.hash}"])


def run_list(args: argparse.Namespace) -> int:
    if args.db is None:
        print("progressivectl slips: --db PATH is required", file=sys.stderr)
        return 2
    try:
        found = slips(args.db, since=args.since, until=args.until)
    except LedgerError as exc:
        print(f"progressivectl slips: {exc}", file=sys.stderr)
        return 2
    if args.pdf is not None:
        return _write_pdf(args.pdf, found, "progressivectl slips")
    if args.json:
        print(json.dumps([s.to_dict() for s in found], indent=2, sort_keys=True))
    elif args.csv:
        sys.stdout.write(render_csv(found))
    else:
        print(render_list(found))
    return 0


def run_pdf(args: argparse.Namespace) -> int:
    try:
        found = one(args.db, args.serial)
    except LedgerError as exc:
        print(f"progressivectl slip pdf: {exc}", file=sys.stderr)
        return 2
    if found is None:
        print(f"progressivectl slip pdf: no slip {args.serial} in {args.db}", file=sys.stderr)
        return 1
    return _write_pdf(args.output, [found], "progressivectl slip pdf")


def _write_pdf(path: Path, found: list[StoredSlip], prog: str) -> int:
    data = slips_pdf((s.slip, s.at, s.hash, s.void) for s in found)
    try:
        path.write_bytes(data)
    except OSError as exc:
        print(f"{prog}: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"{path}: {len(found)} slip(s), {max(2 * len(found), 1)} page(s)")
    return 0


def run_reconcile(args: argparse.Namespace) -> int:
    try:
        report = reconcile(args.db, since=args.since, until=args.until)
        if args.link_db is not None:  # a linked table: its linked slips against the link's
            if ledger_kind(args.link_db) != "link":
                raise LedgerError(f"{args.link_db}: not a link's ledger (--link-db)")
            found = slips(args.db, since=args.since, until=args.until)
            report.linked, more = linked_differences(
                found, args.link_db, report.table_id, since=args.since, until=args.until
            )
            report.differences.extend(more)
    except LedgerError as exc:
        print(f"progressivectl slips reconcile: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict(), indent=2, sort_keys=True) if args.json else report.render())
    return 0 if report.ok else 1
