"""``progressivectl``: the operator's tool.

Each subcommand lives in its own module and registers itself here. Exit statuses
(docs/operations.md, "Exit codes"): 0 success, 1 a check failed or the daemon refused,
2 bad usage or a bad file, 3 (``link reconcile``) a ledger missing, 4 (``link reconcile``) a
file that is not a ledger of the right kind, 130 Ctrl-C, 141 the output pipe closed early.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from progressived import __version__
from progressived.cli.common import CliParser, add_completion, guarded

# Commands that run for a long time on small machines (a sign server beside a screen): for
# them only their own module is loaded, not the engine, ledger and PAR code the other
# commands need (about 19 MB of a sign server's resident memory).
_LIGHT = ("sign",)


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the first word that is not a flag)."""
    return next((word for word in argv if not word.startswith("-")), None)


def _light_parser() -> argparse.ArgumentParser:
    from progressived.cli import sign_cmd  # noqa: PLC0415

    parser = CliParser(
        prog="progressivectl", description="Operate and inspect a progressived controller."
    )
    parser.add_argument("--version", action="version", version=f"progressivectl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sign_cmd.register(sub)
    return parser


def build_parser() -> argparse.ArgumentParser:
    # Imported here, inside main's Ctrl-C guard: an interrupt while they load is one line.
    from progressived.cli import (  # noqa: PLC0415
        broker_acl_cmd,
        control_cmd,
        ledger_cmd,
        link_ctl,
        par_cmd,
        report_cmd,
        sign_cmd,
        simulate_cmd,
        slip_cmd,
    )

    parser = CliParser(
        prog="progressivectl", description="Operate and inspect a progressived controller."
    )
    parser.add_argument("--version", action="version", version=f"progressivectl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    simulate_cmd.register(sub)
    par_cmd.register(sub)
    sign_cmd.register(sub)
    control_cmd.register(sub)
    ledger_cmd.register(sub)
    ledger_cmd.register_meters(sub)
    ledger_cmd.register_hits(sub)
    slip_cmd.register(sub)
    link_ctl.register(sub)
    report_cmd.register(sub)
    broker_acl_cmd.register(sub)
    # Subcommands from plugins (e.g. the drivers' simulate-board): progressived never
    # imports a driver module itself.
    for plugin in sorted(entry_points(group="progressived.ctl"), key=lambda ep: ep.name):
        plugin.load()(sub)
    add_completion(sub, build_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        command = _command_of(words)
        parser = _light_parser() if command in _LIGHT else build_parser()
        args = parser.parse_args(words)
        result: int = args.handler(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the guard, not at exit
        return int(result)

    return guarded("progressivectl", body)


if __name__ == "__main__":
    sys.exit(main())
