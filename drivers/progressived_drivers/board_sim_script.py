"""The simulator's command language (``simulate-board --script`` and stdin; the list is
:data:`SIM_COMMANDS_HELP`), kept apart from the simulator so the words a tester types and
the board they drive can change separately."""

from __future__ import annotations

import asyncio
import shlex
from typing import Protocol

from progressived.board.lights import Light
from progressived_drivers import protocol as p

#: The command language, one line per command (printed by ``help`` and ``--help``).
SIM_COMMANDS_HELP = """\
bet SEAT | place SEAT     a progressive wager appears on SEAT's sensor
unbet SEAT | remove SEAT  the wager leaves SEAT's sensor
key CODE | press CODE     press a keypad key (code as in the keypad map, e.g. LOCK, S3, H1)
supervisor on|off         turn the supervisor key switch
unplug | replug           pull / put back the USB cable (the pty disappears / comes back)
freeze | thaw             the board hangs (sends nothing, reads nothing) / recovers
reboot                    the board restarts (new boot id, sequences restart)
noise N                   send N random bytes on the line
error CODE TEXT           the board reports an error
sleep SECONDS             wait
lights | status           print the lights / the board's state
help                      this list
quit                      stop the simulator
# ...                     a comment"""


class SimulatedBoard(Protocol):
    """What the command language drives (:class:`progressived_drivers.board_sim.BoardSimulator`); a
    Protocol, so this module and the simulator do not import each other."""

    @property
    def path(self) -> str | None: ...

    @property
    def lights(self) -> dict[int, Light]: ...

    def _out(self, line: str) -> None: ...
    def place_bet(self, seat: int) -> None: ...
    def remove_bet(self, seat: int) -> None: ...
    def press(self, code: str) -> int: ...
    def supervisor(self, on: bool) -> None: ...
    def unplug(self) -> None: ...
    def replug(self) -> str: ...
    def freeze(self) -> None: ...
    def thaw(self) -> None: ...
    def reboot(self) -> None: ...
    def inject_noise(self, count: int) -> None: ...
    def report_error(self, code: int, text: str) -> None: ...
    def status(self) -> str: ...


def format_lights(lights: dict[int, Light]) -> str:
    return "lights " + " ".join(f"{seat}={lights[seat].value}" for seat in sorted(lights))


class SimCommandError(ValueError):
    """A simulator command line that cannot be run."""


async def run_sim_command(sim: SimulatedBoard, line: str) -> bool:
    """Run one command line on ``sim``; returns False for ``quit``. Raises SimCommandError."""
    text = line.split("#", 1)[0].strip()
    if not text:
        return True
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise SimCommandError(f"cannot read line: {exc}") from None
    verb, args = words[0].lower(), words[1:]
    if verb in _PLAY:
        _play(sim, verb, args)
    elif verb in _FAULTS:
        _fault(sim, verb, args)
    elif verb == "sleep":
        _want(args, 1, "sleep SECONDS")
        await asyncio.sleep(_number(args[0], float))
    elif verb == "lights":
        sim._out(format_lights(sim.lights))
    elif verb == "status":
        sim._out(sim.status())
    elif verb in ("quit", "exit"):
        return False
    else:
        raise SimCommandError(f"unknown command {verb!r} (try: help)")
    return True


_PLAY = frozenset({"bet", "place", "unbet", "remove", "key", "press", "supervisor"})
_FAULTS = frozenset({"unplug", "replug", "freeze", "thaw", "reboot", "noise", "error"})


def _play(sim: SimulatedBoard, verb: str, args: list[str]) -> None:
    """What a dealer and players do: bets on and off the sensors, keys, the supervisor key."""
    if verb in ("bet", "place"):
        _want(args, 1, "bet SEAT")
        sim.place_bet(int(_number(args[0])))
    elif verb in ("unbet", "remove"):
        _want(args, 1, "unbet SEAT")
        sim.remove_bet(int(_number(args[0])))
    elif verb in ("key", "press"):
        _want(args, 1, "key CODE")
        sim.press(args[0])
    elif verb == "supervisor":
        if len(args) != 1 or args[0].lower() not in ("on", "off"):
            raise SimCommandError("usage: supervisor on|off")
        sim.supervisor(args[0].lower() == "on")


def _fault(sim: SimulatedBoard, verb: str, args: list[str]) -> None:
    """A fault a real board or its cable can have: unplugged, frozen, rebooted, noisy, erring."""
    if verb == "unplug":
        _want(args, 0, "unplug")
        sim.unplug()
        sim._out("unplugged")
    elif verb == "replug":
        _want(args, 0, "replug")
        sim._out(f"replugged {sim.replug()} -> {sim.path}")
    elif verb == "freeze":
        _want(args, 0, "freeze")
        sim.freeze()
    elif verb == "thaw":
        _want(args, 0, "thaw")
        sim.thaw()
    elif verb == "reboot":
        _want(args, 0, "reboot")
        sim.reboot()
    elif verb == "noise":
        _want(args, 1, "noise N")
        sim.inject_noise(min(int(_number(args[0])), 1 << 20))
    elif verb == "error":
        if len(args) < 2:
            raise SimCommandError("usage: error CODE TEXT")
        sim.report_error(int(_number(args[0])) & 0xFF, " ".join(args[1:])[: p.MAX_TEXT_LEN])


def _want(args: list[str], count: int, usage: str) -> None:
    if len(args) != count:
        raise SimCommandError(f"usage: {usage}")


def _number(value: str, kind: type[int] | type[float] = int) -> float:
    try:
        out = kind(value)
    except ValueError:
        raise SimCommandError(f"not a number: {value!r}") from None
    if out < 0:
        raise SimCommandError(f"must not be negative: {value!r}")
    return out
