"""``progressivectl simulate-board``: a table sensor board simulated on a pseudo-terminal.

Prints the pty path (or makes ``--link`` a symlink to it), runs ``--script`` then the
commands on stdin, and prints every change of the lights the controller tells it to show.
It keeps running after the end of stdin until ``quit`` or Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import grp
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from progressived_drivers.board_sim import BoardSimulator, SimCommandError
from progressived_drivers.board_sim_script import SIM_COMMANDS_HELP


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "simulate-board",
        help="simulate the table sensor board on a pseudo-terminal",
        description="Speak the board side of the sensor-board protocol on a pty.\n\n"
        "Commands (from --script, then stdin):\n" + SIM_COMMANDS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--link", type=Path, metavar="PATH", help="make PATH a symlink to the pty")
    p.add_argument("--script", type=Path, metavar="FILE", help="run these commands first")
    p.add_argument("--board-id", default="SIM-1", metavar="ID", help="board id (default SIM-1)")
    p.add_argument("--seats", type=int, default=7, help="seats on the board (default 7)")
    p.add_argument(
        "--heartbeat",
        type=float,
        default=1.0,
        metavar="S",
        help="heartbeat interval until the controller sets one (default 1.0)",
    )
    p.add_argument(
        "--group",
        metavar="GROUP",
        help="give the pty to GROUP with mode 0660, e.g. dialout: the installed service's "
        "user may then open it (docs/operations.md)",
    )
    p.add_argument("--no-stdin", action="store_true", help="do not read commands from stdin")
    p.set_defaults(handler=run)


def _out(line: str) -> None:
    print(line, flush=True)


def _stdin_lines(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
    """A daemon thread: stdin lines into the loop's queue (None at the end)."""

    def pump() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(queue.put_nowait, line)
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=pump, name="stdin", daemon=True).start()


async def _run_line(sim: BoardSimulator, line: str, where: str) -> bool:
    try:
        return await sim.run_command(line)
    except SimCommandError as exc:
        print(f"{where}: {exc}", file=sys.stderr, flush=True)
        return True


async def simulate(args: argparse.Namespace, group: int | None = None) -> int:
    sim = BoardSimulator(
        board_id=args.board_id,
        seats=args.seats,
        link=args.link,
        heartbeat_interval_s=args.heartbeat,
        on_output=_out,
        group=group,
    )
    path = await sim.start()
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    for sig in (signal.SIGINT, signal.SIGTERM):  # stop cleanly: close the pty, remove the link
        loop.add_signal_handler(sig, main.cancel)
    if args.link is not None:
        _out(f"link {path} -> {sim.path}")
    else:
        _out(f"pty {path}")
    try:
        await _commands(sim, args)
    except asyncio.CancelledError:
        _out("stopped")
    finally:
        await sim.stop()
    return 0


async def _commands(sim: BoardSimulator, args: argparse.Namespace) -> None:
    if args.script is not None:
        for number, line in enumerate(args.script.read_text().splitlines(), start=1):
            if line.strip().lower() == "help":
                _out(SIM_COMMANDS_HELP)
            elif not await _run_line(sim, line, f"{args.script}:{number}"):
                return
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    if not args.no_stdin:
        _stdin_lines(asyncio.get_running_loop(), queue)
    else:
        queue.put_nowait(None)
    while (line := await queue.get()) is not None:
        if line.strip().lower() == "help":
            _out(SIM_COMMANDS_HELP)
        elif not await _run_line(sim, line, "stdin"):
            return
    await asyncio.Event().wait()  # end of stdin: keep the board up until quit, SIGINT, SIGTERM


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.seats <= 32:
        print("progressivectl simulate-board: --seats must be 1..32", file=sys.stderr)
        return 2
    if args.script is not None and not args.script.is_file():
        print(f"progressivectl simulate-board: {args.script}: no such file", file=sys.stderr)
        return 2
    group = None
    if args.group is not None:
        try:
            group = grp.getgrnam(args.group).gr_gid
        except KeyError:
            print(f"progressivectl simulate-board: --group: no group {args.group}", file=sys.stderr)
            return 2
    try:
        return asyncio.run(simulate(args, group))
    except PermissionError as exc:
        print(
            f"progressivectl simulate-board: cannot give the pty to group {args.group}: "
            f"{exc.strerror} (run it as root, or as a member of {args.group})",
            file=sys.stderr,
        )
        return 2
    except OSError as exc:
        print(f"progressivectl simulate-board: {exc}", file=sys.stderr)
        return 2
