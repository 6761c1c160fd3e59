"""``progressivectl report liability``: the progressive liability over a shift, a gaming
day, a quarter or two local times, reconciled per meter, from the ledgers (docs/reports.md).

Exit status: 0 every meter's variance is 0 and verify passed over the period; 1 a variance
is not 0 or verify failed (the report is still written, naming it); 2 bad usage, a bad
``[site]`` section or period, a ledger that cannot be read, an output that cannot be
written; 3 a ledger is missing; 4 a file is not a ledger; 8 `--html` or `--pdf` without
the report extra (matplotlib). Read-only, safe while the
daemons write.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from progressived.cli.common import Exit, print_config_error
from progressived.storage.location import parse, shown

PROG = "progressivectl report liability"


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "report", help="reports for accounting and the regulator",
        description="Reports made from the ledgers.",
    )
    rsub = p.add_subparsers(dest="report_command", required=True, metavar="REPORT")
    r: argparse.ArgumentParser = rsub.add_parser(
        "liability",
        help="progressive liability by shift, gaming day or quarter, reconciled per meter",
        description="Per meter, per table and in total: the opening liability (meter, "
        "reserve, overflow, awards pending), contributions, seeds and resets, awards paid, "
        "operator adjustments, the closing liability and the variance, which must be 0 to "
        "the unit; awards, adjustments and parameter changes listed; the PAR sheet's "
        "expectation beside the actual. Exit 0 when every variance is 0 and verify passed "
        "over the period, 1 otherwise, 2 bad usage, 3 a ledger missing, 4 not a ledger.",
    )
    r.add_argument("--db", type=parse, action="append", default=[], metavar="PATH",
                   help="a table's ledger, or a link's (a file or a postgresql:// URL); repeat")
    r.add_argument("--link-db", type=parse, action="append", default=[], metavar="PATH",
                   help="the link's ledger: a file or a postgresql:// URL")
    when = r.add_mutually_exclusive_group(required=True)
    when.add_argument("--shift", metavar="DATE/NAME",
                      help="one shift of a gaming day, e.g. 2026-11-28/swing ([site] shifts)")
    when.add_argument("--day", metavar="DATE", help="one gaming day, e.g. 2026-11-28")
    when.add_argument("--quarter", metavar="YYYY-QN", help="a calendar quarter, e.g. 2026-Q4")
    when.add_argument("--from", dest="start", metavar="TIME",
                      help="from this local time (with --to), e.g. 2026-11-28T06:00")
    r.add_argument("--to", dest="end", metavar="TIME", help="to this local time (excluded)")
    r.add_argument("--config", type=Path, metavar="FILE",
                   help="a table's or link's configuration file: its [site] section (time "
                   "zone, shifts); default UTC with one shift from 00:00")
    r.add_argument("--paytables", type=Path, metavar="DIR",
                   help="the paytable folder for the PAR sheets (default: the shipped one)")
    r.add_argument("--json", metavar="FILE", help="write the report as JSON ('-': stdout)")
    r.add_argument("--html", type=Path, metavar="FILE", help="write a self-contained HTML file")
    r.add_argument("--pdf", type=Path, metavar="FILE", help="write a PDF")
    r.add_argument("--paper", choices=("A4", "letter"), default="A4",
                   help="the PDF's paper, landscape (default A4); the HTML prints on either")
    r.add_argument("--csv", type=Path, metavar="DIR", help="write one CSV file per table here")
    r.set_defaults(handler=run_liability)


def _fail(message: str, status: Exit = Exit.USAGE) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return int(status)


def _period(args: argparse.Namespace) -> Any:
    from progressived.config.site import SiteSection, load_site  # noqa: PLC0415
    from progressived.report import period  # noqa: PLC0415

    site = SiteSection() if args.config is None else load_site(args.config)
    if args.start is not None or args.end is not None:
        if args.start is None or args.end is None:
            raise period.PeriodError("--from and --to go together")
        return period.between(site, args.start, args.end)
    if args.shift is not None:
        return period.shift(site, args.shift)
    if args.day is not None:
        return period.gaming_day(site, args.day)
    return period.quarter(site, args.quarter)


def run_liability(args: argparse.Namespace) -> int:
    from progressived.config.table import ConfigError  # noqa: PLC0415
    from progressived.ledger.audit_copy import readable  # noqa: PLC0415
    from progressived.ledger.errors import (  # noqa: PLC0415
        LedgerError,
        LedgerMismatch,
        LedgerMissing,
    )
    from progressived.report import liability, source, text  # noqa: PLC0415
    from progressived.report.period import PeriodError  # noqa: PLC0415

    locations = [*args.db, *args.link_db]
    if not locations:
        return _fail("give at least one ledger (--db PATH, --link-db PATH|URL)")
    try:
        period = _period(args)
    except ConfigError as exc:
        print_config_error(PROG, exc)
        return int(Exit.USAGE)
    except PeriodError as exc:
        return _fail(str(exc))
    try:
        with contextlib.ExitStack() as stack:
            ledgers = []
            for location in locations:
                path = stack.enter_context(readable(location))
                where = shown(location) if isinstance(location, str) else str(
                    Path(location).resolve())
                ledgers.append(source.read(path, where, period, liability.bucket_of(period)))
    except LedgerMissing as exc:
        return _fail(str(exc), Exit.LEDGER_MISSING)
    except LedgerMismatch as exc:
        return _fail(str(exc), Exit.LEDGER_MISMATCH)
    except LedgerError as exc:  # a database that cannot be read, a damaged file
        return _fail(str(exc))
    report = liability.build(ledgers, period, created_at=datetime.now(UTC),
                             paytables=args.paytables)
    from progressived.report import tables  # noqa: PLC0415

    data = dict(tables.tables(report))  # every format shows these same rows
    try:
        _write(report, args, data)
    except ModuleNotFoundError as exc:  # the report extra is not installed
        return _fail(f"--html and --pdf need the report extra ({exc.name} is not installed): "
                     "pip install 'progressived[report]'", Exit.MISSING_REQUIREMENT)
    except OSError as exc:
        return _fail(f"cannot write the report: {exc.strerror or exc}")
    if args.json != "-":
        print(text.render(report, colour=sys.stdout.isatty(), data=data))
    return int(Exit.OK if report.ok else Exit.FAILED)


def _write(report: Any, args: argparse.Namespace, data: dict[str, Any]) -> None:
    from progressived.report import csvfiles, tables  # noqa: PLC0415

    if args.csv is not None:
        csvfiles.write(report, args.csv, data)
    if args.html is not None or args.pdf is not None:
        from progressived.report import html, pdf, plots  # noqa: PLC0415

        figures = plots.figures(report)
        if args.html is not None:
            args.html.write_text(html.render(report, figures, data), encoding="utf-8")
        if args.pdf is not None:
            args.pdf.write_bytes(pdf.render(report, figures, args.paper, data))

    if args.json is not None:
        # one line: the standard library's C encoder (indenting takes its pure Python one)
        body = json.dumps(tables.document(report, data), sort_keys=True) + "\n"
        if args.json == "-":
            sys.stdout.write(body)
        else:
            Path(args.json).write_text(body, encoding="utf-8")
