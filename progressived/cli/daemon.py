"""``progressived``: the daemon (``run``), its configuration check, and the demo."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from progressived import __version__, logs
from progressived.config import ConfigError
from progressived.selfcheck import run_selfcheck
from progressived.service import run_daemon
from progressived.settings import DaemonConfig, load_daemon_config


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="progressived", description="Progressive jackpot controller for casino table games."
    )
    parser.add_argument("--version", action="version", version=f"progressived {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="run the controller")
    run.add_argument("--config", required=True, type=Path, metavar="FILE")
    check = sub.add_parser("check-config", help="validate a configuration file and exit")
    check.add_argument("config", type=Path, metavar="FILE")
    check = sub.add_parser(
        "self-check", help="print the software, configuration and ledger digests and check them"
    )
    check.add_argument("--config", required=True, type=Path, metavar="FILE")
    demo = sub.add_parser(
        "demo", help="simulated board, broker, daemon and sign on this machine, then interactive"
    )
    demo.add_argument("--headless", action="store_true", help="play the script, print, exit 0")
    demo.add_argument("--rounds", type=int, default=3, help="rounds to play (headless)")
    demo.add_argument("--workdir", type=Path, help="where the demo keeps its ledger and config")
    demo.add_argument(
        "--keep", action="store_true", help="keep the temporary directory (--workdir is kept)"
    )
    return parser


def _load(path: Path) -> DaemonConfig | None:
    """The validated configuration, or ``None`` after printing why it is not valid."""
    try:
        return load_daemon_config(path)
    except ConfigError as exc:
        print(f"progressived: {exc}", file=sys.stderr)
        return None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "check-config":
        if (config := _load(args.config)) is None:
            return 2
        print(f"{args.config}: ok ({config.params.table_id}, paytable {config.params.paytable.id})")
        return 0
    if args.command == "run":
        if (config := _load(args.config)) is None:
            return 2
        logs.configure(config.log.format, config.log.level)
        return asyncio.run(run_daemon(config))
    if args.command == "self-check":
        if (config := _load(args.config)) is None:
            return 2
        paytable = Path(config.params.paytable.source)
        result = run_selfcheck(
            ledger_path=config.ledger.path,
            config_path=config.source,
            paytable_path=paytable if paytable.is_file() else None,
            expected_software=config.selfcheck.software_sha256,
        )
        print(json.dumps({"ok": result.ok, "problems": result.problems, **result.detail}, indent=2))
        return 0 if result.ok else 1
    if args.command == "demo":
        from progressived.demo import run_demo  # noqa: PLC0415 - only the demo needs its imports

        return run_demo(
            headless=args.headless, rounds=args.rounds, workdir=args.workdir, keep=args.keep
        )
    return 2


if __name__ == "__main__":
    sys.exit(main())
