"""The linked demo for a person at the terminal: where everything is, a sign, typed commands.

``progressived demo --tables N`` without ``--headless`` has the single-table demo's shape:
it prints where every process keeps its files, sockets and metrics, starts a web sign
(``progressivectl sign --web``: the link's panel beside every table, and a page per table)
and prints its URLs, keeps the linked meter on screen while the script plays, then sends
what is typed to the board simulator of a chosen table (``table 2``, then ``bet 3``,
``key LOCK``; ``help`` lists them) until the end of input, ``quit`` or Ctrl-C.

Why a module of its own: :mod:`progressived.demo.link` starts and stops the processes (also
for the reliability suite) and :mod:`progressived.demo.link_script` plays the acts; this is
only what a person sees and types.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Protocol, TextIO, runtime_checkable

from progressived.demo.link import LINK, METER, DemoTable, Floor, FloorRun, Process, dollars
from progressived.signs.screen import Screen
from progressived.signs.terminal import big
from progressived.testing.broker import free_port
from progressived.testing.rig import PROGRESSIVECTL


@runtime_checkable
class CommandBoard(Protocol):
    """A board simulator that runs the typed command language (docs/protocol.md,
    ``progressivectl simulate-board``) and hands its answers to ``on_output``."""

    on_output: Callable[[str], None] | None

    async def run_command(self, line: str) -> bool: ...


HELP = """\
table N | table ID   type at that table's board from now on (N: 1..{count}; now {current})
tables               every table: its board, control socket and web sign page
help                 this list
quit                 stop everything (so do Ctrl-D and Ctrl-C)
anything else goes to the chosen table's board simulator (docs/protocol.md):
  bet SEAT, unbet SEAT, key CODE (LOCK, S3, H1, OK, NO, RECON, VOID), supervisor on|off,
  lights, status, unplug, replug, freeze, thaw, reboot"""


def web_sign(run: FloorRun, work: Path, web_port: int) -> Process:
    """``progressivectl sign --web``: the linked meter's panel and every table's page."""
    cmd = [*PROGRESSIVECTL, "sign", "--web", "--port", str(run.port), "--link", LINK]
    for t in run.tables:
        cmd += ["--table", t.id]
    cmd += ["--listen", f"127.0.0.1:{web_port}"]
    return Process("web sign", cmd, work / "websign.log")


async def serving(sign: Process, timeout: float = 30) -> None:
    """Until the web sign says it is listening (its log's ``serving`` line)."""
    async with asyncio.timeout(timeout):
        while "serving http://" not in sign.log.read_text(errors="replace"):
            if not sign.alive():
                raise RuntimeError(f"the web sign exited; see {sign.log}")
            await asyncio.sleep(0.05)


def banner(run: FloorRun, work: Path, web_port: int) -> str:
    """Where everything is: the broker, the link controller, each table, the web sign."""
    web = f"http://127.0.0.1:{web_port}"
    link_sock = work / "link.sock"
    lines = [
        f"broker      mqtt://{run.broker.host}:{run.port}  (prefix progressive)",
        f"link        progressived link --config {run.link_config}",
        f"  control   {link_sock}  (progressivectl status --socket {link_sock})",
        f"  ledger    {work / 'link.db'}",
        f"  log       {run.link.log}",
        f"  metrics   http://127.0.0.1:{run.link_metrics_port}/metrics",
    ]
    for number, t in enumerate(run.tables, start=1):
        sock = t.work / "control.sock"
        lines += [
            f"table {number}     {t.id}: progressived run --config {t.config}",
            f"  board     pty at {t.work / 'board'}  (type `table {number}`, then board commands)",
            f"  control   {sock}  (progressivectl status --socket {sock})",
            f"  ledger    {t.work / 'ledger.db'}",
            f"  log       {t.daemon.log}",
            f"  metrics   http://127.0.0.1:{t.metrics_port}/metrics",
            f"  web sign  {web}/table/{t.id}",
        ]
    lines.append(
        f"web sign    {web}/  (link {LINK}'s meter beside every table; open it in a browser)"
    )
    return "\n".join(lines)


def sign_frame(floor: Floor, tables: list[DemoTable]) -> str:
    """The linked meter as the signs show it, and each table's progressive open or closed."""
    units = floor.meter.get("units")
    shown = dollars(units) if isinstance(units, int) else "----"
    states = []
    for t in tables:
        changes = [e for e in floor.events.get(t.id, []) if e.get("kind") in _OPEN_CLOSE]
        last = changes[-1] if changes else {}
        closed = last.get("kind") == "table_closed"
        states.append(f"{t.id} " + (f"CLOSED ({last.get('reason')})" if closed else "open"))
    head = f"linked progressive {METER} (link {LINK}, epoch {floor.meter.get('epoch', '-')})"
    return "\n".join([head, "", big(shown), "", "   ".join(states)])


_OPEN_CLOSE = ("table_closed", "table_opened")


class Console:
    """The typed commands: choose a table, or send a line to the chosen table's board."""

    def __init__(self, tables: list[DemoTable], say: Callable[[str], None], web: str) -> None:
        self.tables = tables
        self.say = say
        self.web = web
        self.current = tables[0]
        for t in tables:
            if isinstance(t.board, CommandBoard):
                t.board.on_output = self._board_output(t)

    def _board_output(self, table: DemoTable) -> Callable[[str], None]:
        def show(line: str) -> None:
            if table is self.current:  # the other boards' lights would drown the answers
                self.say(f"{table.id} board: {line}")

        return show

    @property
    def prompt(self) -> str:
        return f"{self.current.id}> "

    async def handle(self, line: str) -> bool:
        """Run one typed line; False when it asks to stop."""
        words = line.split()
        if not words:
            return True
        verb = words[0].lower()
        if verb in ("quit", "exit"):
            return False
        if verb == "help":
            self.say(HELP.format(count=len(self.tables), current=self.current.id))
        elif verb == "tables":
            for number, t in enumerate(self.tables, start=1):
                chosen = "  <- typing here" if t is self.current else ""
                self.say(
                    f"{number} {t.id}: control {t.work / 'control.sock'}, "
                    f"web sign {self.web}/table/{t.id}{chosen}"
                )
        elif verb == "table":
            self.choose(words[1:])
        else:
            await self.to_board(line.strip())
        return True

    def choose(self, args: list[str]) -> None:
        wanted = args[0] if len(args) == 1 else ""
        ids = [t.id for t in self.tables]
        if wanted.isdigit() and 1 <= int(wanted) <= len(self.tables):
            self.current = self.tables[int(wanted) - 1]
        elif wanted in ids:
            self.current = self.tables[ids.index(wanted)]
        else:
            self.say(f"usage: table N (1..{len(self.tables)}) or table ID ({', '.join(ids)})")
            return
        self.say(f"typing at {self.current.id}'s board")

    async def to_board(self, line: str) -> None:
        board = self.current.board
        if not isinstance(board, CommandBoard):
            self.say(f"{self.current.id} board error: this simulator takes no typed commands")
            return
        try:
            await board.run_command(line)
        except ValueError as exc:  # the simulator's own words: unknown command, bad seat
            self.say(f"{self.current.id} board error: {exc}")


async def typed_lines() -> asyncio.Queue[str | None]:
    """Standard input's lines, read by a thread, as a queue ending with ``None``."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()

    def put(line: str | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: the demo is stopping
            loop.call_soon_threadsafe(lines.put_nowait, line)

    def read() -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in sys.stdin:
                put(line)
        put(None)

    threading.Thread(target=read, name="stdin", daemon=True).start()
    return lines


async def interact(console: Console, screen: Screen) -> None:
    """Typed lines to the console until the end of input or ``quit``."""
    hint = "type: table N, then bet 3, key LOCK, key S3, key H1, key RECON; help; Ctrl-C stops"
    screen.footer = f"{hint}\n{console.prompt}"
    if not screen.tty:
        screen.say(hint)
    lines = await typed_lines()
    while (line := await lines.get()) is not None:
        if line.strip():
            screen.say(f"{console.prompt}{line.strip()}")
        if not await console.handle(line):
            break
        screen.footer = f"{hint}\n{console.prompt}"
    else:
        screen.say("end of input: stopping")
        return
    screen.say("quit: stopping")


@contextlib.asynccontextmanager
async def on_screen(
    run: FloorRun, work: Path, floor: Floor, screen: Screen, out: TextIO
) -> AsyncIterator[str]:
    """The web sign listening, where everything is printed, the linked meter kept on screen;
    yields the web sign's address. At exit the web sign stops and the screen is drawn once
    more."""
    web_port = free_port()
    web = f"http://127.0.0.1:{web_port}"
    sign = web_sign(run, work, web_port)
    sign.start()
    drawing: asyncio.Task[None] | None = None
    try:
        await serving(sign)
        print(banner(run, work, web_port), file=out, flush=True)
        screen.header = (
            f"web sign {web}/  (link {LINK} beside every table; one table: {web}/table/ID)\n"
            f"files {work}"
        )
        drawing = asyncio.create_task(keep_drawing(screen, floor, run.tables))
        yield web
    finally:
        if drawing is not None:
            drawing.cancel()
            with contextlib.suppress(BaseException):
                await drawing
        screen.footer = ""
        screen.draw()
        sign.stop()


async def keep_drawing(screen: Screen, floor: Floor, tables: list[DemoTable]) -> None:
    """Redraw the sign and the console while the demo runs (a task, cancelled at the end)."""
    while True:
        screen.sign(sign_frame(floor, tables))
        screen.draw()
        await asyncio.sleep(0.1)
