"""``progressived``: the daemon (``run``), the link controller (``link``), a ledger's
creation (``init``), the configuration check, the self-check, and the demo.

Expected faults end with one line on standard error and the exit status of
:class:`progressived.cli.common.Exit` (docs/operations.md, "Exit codes"). This module stays
light: the commands (:mod:`progressived.cli.daemon_cmds`) are imported inside the Ctrl-C
guard, so an interrupt in the first moments prints one line too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from progressived import __version__
from progressived.cli.common import CliParser, add_completion, guarded


def build_parser() -> argparse.ArgumentParser:
    parser = CliParser(
        prog="progressived", description="Progressive jackpot controller for casino table games."
    )
    parser.add_argument("--version", action="version", version=f"progressived {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="run the controller (its ledger must exist: see init)")
    run.add_argument("--config", required=True, type=Path, metavar="FILE")
    link = sub.add_parser(
        "link",
        help="run a link controller (one linked progressive for many tables; docs/link.md)",
        description="Run the link controller of a configuration with a [link] section. Its "
        "ledger must exist (progressived init --config FILE creates it).",
    )
    link.add_argument("--config", required=True, type=Path, metavar="FILE")
    link.add_argument(
        "--check",
        action="store_true",
        help="validate the file, open and replay the link ledger, and exit",
    )
    link.add_argument(
        "--no-standby",
        action="store_true",
        help="a ledger in a database whose lease another controller holds: exit 5 instead "
        "of waiting as a standby; a lease lost while serving: exit 5 instead of standing by",
    )
    archive = sub.add_parser(
        "archive",
        help="run the archive: every table's ledger rows into the floor's database "
        "(docs/archive.md)",
        description="Receive every table's ledger rows over MQTT, check each table's hash "
        "chain, store them in PostgreSQL and answer each table's archived head.",
    )
    archive.add_argument("--config", required=True, type=Path, metavar="FILE")
    archive.add_argument(
        "--init", action="store_true", help="make the archive's tables in an empty database, once"
    )
    init = sub.add_parser(
        "init",
        help="create a new table's (or link's) ledger, once, before the first run",
        description="Create the ledger at the configuration's [ledger] path for its table, "
        "recording the operator id, the OS user and the time in the ledger_created row; "
        "for a file with a [link] section, the link controller's ledger. "
        "Refuses an existing file and a missing directory.",
    )
    init.add_argument("--config", required=True, type=Path, metavar="FILE")
    init.add_argument("--operator", metavar="ID", help="your operator id (journaled)")
    check = sub.add_parser(
        "check-config",
        help="validate a configuration file, its ledger and control group, and exit",
    )
    check.add_argument("config", type=Path, metavar="FILE")
    check.add_argument(
        "--user",
        metavar="NAME",
        help="check that this user (the daemon's: progressived) may open the ledger for "
        "writing; root only (default: the user running the check)",
    )
    check.add_argument(
        "--file-only",
        action="store_true",
        help="check the file alone, not this machine's ledger and group (a file meant for "
        "another machine)",
    )
    check.add_argument(
        "--link",
        type=Path,
        metavar="LINKFILE",
        help="a linked table's file: check it against its link controller's file too (the "
        "table listed, each linked meter's link_meter, the hands paid)",
    )
    check = sub.add_parser(
        "self-check", help="print the software, configuration and ledger digests and check them"
    )
    check.add_argument("--config", required=True, type=Path, metavar="FILE")
    demo = sub.add_parser(
        "demo", help="simulated board, broker, daemon and sign on this machine, then interactive"
    )
    demo.add_argument("--headless", action="store_true", help="play the script, print, exit 0")
    demo.add_argument("--rounds", type=int, default=3, help="rounds to play (headless)")
    demo.add_argument(
        "--tables",
        type=int,
        default=1,
        metavar="N",
        help="N >= 2: a linked meter across N tables, with the link controller (docs/link.md)",
    )
    demo.add_argument(
        "--ha",
        action="store_true",
        help="with --tables N: the whole HA link (3 etcd, 3 Patroni/PostgreSQL, 2 brokers, "
        "2 link controllers) and its faults mid-play (docs/ha.md)",
    )
    demo.add_argument("--workdir", type=Path, help="where the demo keeps its ledger and config")
    demo.add_argument(
        "--keep", action="store_true", help="keep the temporary directory (--workdir is kept)"
    )
    add_completion(sub, build_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        args = build_parser().parse_args(argv)
        from progressived.cli.daemon_cmds import dispatch  # noqa: PLC0415 - see the docstring

        status = dispatch(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the guard, not at exit
        return status

    return int(guarded("progressived", body))


if __name__ == "__main__":
    sys.exit(main())
