"""Scripted rounds through the engine: the engine's scriptable front door.

Used by ``progressivectl simulate`` (tests, dealer training, what-if questions) and by
the demo. A script is one command per line; a rejected line is reported and the run goes on.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol

from progressived.core.money import UNITS_PER_CENT, cents, display
from progressived.core.params import TableParams
from progressived.engine import (
    Command,
    Confirm,
    KeyHand,
    Lock,
    Reconcile,
    Reject,
    SamePlayer,
    Sensors,
    TableState,
    Void,
    accounts,
    decide,
    initial_state,
)
from progressived.engine.core import seat_problem
from progressived.engine.events import AwardKeyed, Event, HandKeyed, RoundReconciled, RoundVoided
from progressived.engine.state import Phase

SCRIPT_HELP = """\
bet SEAT          a progressive wager appears on SEAT's sensor
unbet SEAT        the wager leaves SEAT's sensor
lock              LOCK: lock in the wagers on the sensors; the dealer then takes
                  them off the table (rule 15.02(4)), so the sensors clear
key SEAT HAND     key a winning hand (again: turn it off)
confirm | reject  the supervisor confirms / rejects the first award awaiting confirmation
same SEAT SEAT    the two spots are one player for this round (no envy between them)
reconcile         RECONCILE: settle the round
void              VOID (misdeal, supervisor): cancel the round
# ...             a comment"""


MAX_SCRIPT_BYTES = 64 * 1024 * 1024  # a script (file or standard input): about 5 million lines
MAX_LINE = 1000  # characters of one script line; a longer line is rejected, the run goes on


class ScriptError(ValueError):
    """A script line that is not a command, or a script that cannot be read at all."""


def read_script(stream: BinaryIO) -> str:
    """The whole script from ``stream``: at most MAX_SCRIPT_BYTES of UTF-8, or
    :class:`ScriptError` saying why not (read no further than the bound)."""
    data = stream.read(MAX_SCRIPT_BYTES + 1)
    if len(data) > MAX_SCRIPT_BYTES:
        raise ScriptError(f"the script is over {MAX_SCRIPT_BYTES:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ScriptError(f"the script is not UTF-8 text (line {line}, byte {exc.start})") from None


def parse_line(
    line: str, sensed: frozenset[int], at: str, params: TableParams | None = None
) -> Command | None:
    """Turn one script line into a command (``None`` for blank lines and comments).

    ``unbet`` of a seat the table does not have is refused like ``bet`` of it: the board
    reports the full sensor set, so without this check the seat would silently vanish.
    """
    if len(line) > MAX_LINE:
        raise ScriptError(f"a line of {len(line):,} characters (at most {MAX_LINE})")
    text = line.split("#", 1)[0].strip()
    if not text:
        return None
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ScriptError(f"cannot read line: {exc}") from None
    verb, args = words[0].lower(), words[1:]
    return _command(verb, args, sensed, at, params)


def _seat(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ScriptError(f"not a seat number: {value!r}") from None


def _command(
    verb: str, args: list[str], sensed: frozenset[int], at: str, params: TableParams | None
) -> Command:
    """One script command from its words (the verb in lower case)."""
    seat = _seat

    def arity(count: int, usage: str) -> None:
        if len(args) != count:
            raise ScriptError(f"usage: {usage}")

    if verb == "bet":
        arity(1, "bet SEAT")
        return Sensors(present=sensed | {seat(args[0])}, at=at)
    if verb == "unbet":
        arity(1, "unbet SEAT")
        gone = seat(args[0])
        if params is not None and (problem := seat_problem(params, gone)):
            raise ScriptError(problem)
        return Sensors(present=sensed - {gone}, at=at)
    if verb == "lock":
        arity(0, "lock")
        return Lock(at=at)
    if verb == "key":
        arity(2, "key SEAT HAND")
        return KeyHand(seat=seat(args[0]), hand=args[1], at=at)
    if verb == "confirm":
        arity(0, "confirm")
        return Confirm(at=at, actor="supervisor")
    if verb == "reject":
        arity(0, "reject")
        return Reject(at=at, actor="supervisor")
    if verb == "same":
        if len(args) < 2:
            raise ScriptError("usage: same SEAT SEAT")
        return SamePlayer(seats=frozenset(seat(a) for a in args), at=at)
    if verb == "reconcile":
        arity(0, "reconcile")
        return Reconcile(at=at)
    if verb == "void":
        arity(0, "void")
        return Void(at=at, actor="supervisor")
    raise ScriptError(
        f"unknown command {verb!r} (commands: bet, unbet, lock, key, confirm, reject, same, "
        "reconcile, void)"
    )


class EventSink(Protocol):
    """Where a run's events go (the ledger, when ``--ledger`` is given)."""

    def record(self, events: tuple[Event, ...], state: TableState) -> None: ...


@dataclass
class RoundReport:
    round: int
    state: str = "open"
    pays: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Simulation:
    """Runs commands through the engine and keeps what a report needs."""

    params: TableParams
    clock: Callable[[], str] = lambda: ""
    sink: EventSink | None = None
    state: TableState = field(init=False)
    rounds: dict[int, RoundReport] = field(default_factory=dict)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    events: int = 0

    def __post_init__(self) -> None:
        start = initial_state(self.params, self.clock())
        self.state = start.state
        self._record(start.events)

    def restore(self, state: TableState) -> None:
        """Continue from a state rebuilt elsewhere (a ledger)."""
        self.state = state

    def _record(self, events: tuple[Event, ...]) -> None:
        self.events += len(events)
        if self.sink is not None and events:
            self.sink.record(events, self.state)

    def submit(self, command: Command, line: int = 0, text: str = "") -> str | None:
        """Submit one command (decide, then take its state); the rejection reason, or ``None``."""
        decision = decide(self.params, self.state, command)
        if not decision.accepted:
            self.rejected.append({"line": line, "text": text, "reason": decision.reason})
            return decision.reason
        self.state = decision.state
        self._record(decision.events)
        for event in decision.events:
            self._note(event)
        return None

    def _note(self, event: Event) -> None:
        report = self.rounds.setdefault(event.round, RoundReport(event.round))
        if isinstance(event, (AwardKeyed, HandKeyed)) or event.kind == "round_locked":
            report.state = "locked"
        if isinstance(event, RoundReconciled):
            report.state = "reconciled"
            report.pays = [
                {
                    "seat": p.seat,
                    "hand": p.hand,
                    "source": p.source,
                    "cents": cents(p.units),
                    **({"from_seat": p.from_seat} if p.source == "envy" else {}),
                }
                for p in event.settlement
            ]
        elif isinstance(event, RoundVoided):
            report.state = "voided"
            report.pays = []

    def run_script(self, lines: Iterable[str]) -> None:
        for number, line in enumerate(lines, start=1):
            try:
                command = parse_line(line, self.state.sensed, self.clock(), self.params)
            except ScriptError as exc:
                self.rejected.append({"line": number, "text": _quoted(line), "reason": str(exc)})
                continue
            if command is None:
                continue
            if self.submit(command, number, line.strip()) is None and isinstance(command, Lock):
                # The dealer removes the locked wagers from the sensors.
                self.submit(Sensors(present=frozenset(), at=command.at), number, line.strip())

    def meters(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for meter in self.params.meters:
            value = self.state.balance(accounts.meter(meter.id))
            out[meter.id] = {
                "cents": cents(value),
                "reserve_cents": cents(self.state.balance(accounts.reserve(meter.id))),
                "overflow_cents": cents(self.state.balance(accounts.overflow(meter.id))),
                "units": value,
                "display": display(value),
                "state": "pending"
                if self.state.meter_pending(meter.id)
                else ("closed" if self.state.closed else "open"),
            }
        return out

    def report(self) -> dict[str, Any]:
        rounds = []
        for number in sorted(self.rounds):
            report = self.rounds[number]
            if number == self.state.round and self.state.phase is Phase.LOCKED:
                report.state = "pending" if self.state.pending else "locked"
            rounds.append({"round": report.round, "state": report.state, "pays": report.pays})
        balances = self.state.balances
        return {
            "paytable": self.params.paytable.id,
            "wager_cents": cents(self.params.wager_units),
            "rounds": rounds,
            "meters": self.meters(),
            "rejected": self.rejected,
            "totals": {
                "wagers_cents": cents(-balances.get(accounts.WAGERS, 0)),
                "paid_tray_cents": cents(balances.get(accounts.PAID_TRAY, 0)),
                "paid_envy_cents": cents(balances.get(accounts.PAID_ENVY, 0)),
                "paid_attendant_cents": sum(
                    cents(balances.get(accounts.paid_attendant(m), 0))
                    for m in self.params.meter_ids
                ),
                "identity_gap_units": accounts.identity_gap(balances, self.params.meter_ids),
            },
            "events": self.events,
        }


def _quoted(line: str) -> str:
    """A rejected line as the report quotes it: an over-long one is cut (it is not a command)."""
    text = line.strip()
    return text if len(text) <= MAX_LINE else text[:80] + "..."


def render_text(report: dict[str, Any]) -> str:
    """The readable table ``simulate`` prints without ``--json``."""
    lines = [
        f"paytable {report['paytable']}, wager {display(report['wager_cents'] * UNITS_PER_CENT)}"
    ]
    for rnd in report["rounds"]:
        lines.append(f"round {rnd['round']}: {rnd['state']}")
        for pay in rnd["pays"]:
            src = pay["source"] + (f" from seat {pay['from_seat']}" if "from_seat" in pay else "")
            lines.append(
                f"  seat {pay['seat']:>2}  {pay['hand']:<20} {src:<18} "
                f"{display(pay['cents'] * UNITS_PER_CENT):>14}"
            )
    lines.append("meters:")
    for meter_id, meter in report["meters"].items():
        lines.append(
            f"  {meter_id:<8} {meter['display']:>14}  "
            f"reserve {display(meter['reserve_cents'] * UNITS_PER_CENT)}  ({meter['state']})"
        )
    for rej in report["rejected"]:
        lines.append(f"rejected line {rej['line']}: {rej['text']}: {rej['reason']}")
    return "\n".join(lines)
