"""``progressivectl``: the operator's tool.

Each subcommand lives in its own module and registers itself here; exit status 0 on
success, 1 when a check fails, 2 for bad usage or a bad file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from progressived.cli import board_cmd, ledger_cmd, par_cmd, sign_cmd, simulate_cmd


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="progressivectl", description="Operate and inspect a progressived controller."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    simulate_cmd.register(sub)
    par_cmd.register(sub)
    sign_cmd.register(sub)
    board_cmd.register(sub)
    ledger_cmd.register(sub)
    ledger_cmd.register_meters(sub)
    ledger_cmd.register_hits(sub)
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
