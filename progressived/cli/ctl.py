"""``progressivectl``: the operator's tool.

Each subcommand lives in its own module and registers itself here; exit status 0 on
success, 1 when a check fails, 2 for bad usage or a bad file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from progressived.cli import control_cmd, ledger_cmd, par_cmd, sign_cmd, simulate_cmd


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="progressivectl", description="Operate and inspect a progressived controller."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    simulate_cmd.register(sub)
    par_cmd.register(sub)
    sign_cmd.register(sub)
    control_cmd.register(sub)
    ledger_cmd.register(sub)
    ledger_cmd.register_meters(sub)
    ledger_cmd.register_hits(sub)
    # Subcommands from plugins (e.g. the drivers' simulate-board): progressived never
    # imports a driver module itself.
    for plugin in sorted(entry_points(group="progressived.ctl"), key=lambda ep: ep.name):
        plugin.load()(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.handler(args)
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
