"""``progressivectl board-test --port PATH``: protocol conformance test for board makers.

Plays the controller on the board's serial line, runs the cases of docs/protocol.md
("Conformance test") and prints a pass/fail line per case (``--json``: one JSON document).
Exit status 0 only when every case passed, 1 when one failed, 2 when the port cannot be
opened or the usage is wrong. Two cases ask a person at the board to act (press a key,
reboot the board): the request is printed on stderr as ``ACTION: ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import serial

from progressived_drivers.board_link import BoardLink
from progressived_drivers.board_test import BoardTester


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "board-test",
        help="test a table sensor board (or any pty) against the board protocol",
        description="Drive a sensor board through the cases of docs/protocol.md and report "
        "pass/fail per case. Exit 0 only when every case passes.",
    )
    parser.add_argument("--port", required=True, metavar="PATH", help="the board's serial port")
    parser.add_argument("--baudrate", type=int, default=115200, help="default 115200")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--heartbeat-ms",
        type=int,
        default=200,
        metavar="MS",
        help="heartbeat interval told to the board (10..60000, default 200)",
    )
    parser.add_argument(
        "--action-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="how long to wait for a requested key press or reboot (default 60)",
    )
    parser.set_defaults(handler=run)


def _ask(instruction: str, sim_command: str) -> None:
    print(f"ACTION: {instruction} (simulate-board: {sim_command})", file=sys.stderr, flush=True)


async def _test(args: argparse.Namespace) -> int:
    link = BoardLink(args.port, args.baudrate)
    try:
        await link.open()
    except (OSError, serial.SerialException, ValueError) as exc:
        print(f"progressivectl board-test: cannot open {args.port}: {exc}", file=sys.stderr)
        return 2
    try:
        tester = BoardTester(
            link,
            act=_ask,
            heartbeat_ms=args.heartbeat_ms,
            action_timeout_s=args.action_timeout,
        )
        report = await tester.run()
    finally:
        await link.close()
    if args.json:
        print(json.dumps(report.as_json(), indent=2, sort_keys=True))
    else:
        print(report.text())
    return 0 if report.passed else 1


def run(args: argparse.Namespace) -> int:
    if not 10 <= args.heartbeat_ms <= 60000:
        print("progressivectl board-test: --heartbeat-ms must be 10..60000", file=sys.stderr)
        return 2
    if args.action_timeout <= 0:
        print("progressivectl board-test: --action-timeout must be positive", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_test(args))
    except KeyboardInterrupt:
        print("progressivectl board-test: interrupted", file=sys.stderr)
        return 130
