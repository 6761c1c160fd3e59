"""The demo's console: what happened at the table, in words, and the processes' answers.

The demo's board simulator and daemon write to ``board.log`` and ``daemon.log``; someone
typing ``bet 9`` at the demo must still see the simulator's answer (``seat 9 outside 1..7``)
and the daemon's refusals on screen. :func:`tee_lines` copies a process's output to its log
file and hands each line to the screen; :func:`narrate` turns the table's published events
into one sentence each, so the scripted rounds say on screen when an envy bonus is paid or a
keying mistake is turned off.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import IO, Any

from progressived.core.money import display_cents

_QUIET_DAEMON_WARNINGS = frozenset({"key sequence refused", "command rejected"})
"""Daemon warnings already shown from their events (``key_refused``, ``command_rejected``)."""


def money(cents: object) -> str:
    """Whole cents as dollars, e.g. ``$1,000.45``."""
    return display_cents(cents if isinstance(cents, int) else 0)


_WIN_KINDS = frozenset(
    {"hand_keyed", "hand_unkeyed", "award_keyed", "award_confirmed", "envy"}
    | {"award_rejected", "award_unkeyed", "award_reversed"}
)
_TABLE_KINDS = frozenset(
    {"key_refused", "command_rejected", "table_closed", "table_opened"}
    | {"board_online", "board_offline"}
)


def narrate(event: dict[str, Any]) -> str | None:
    """One line saying what a table event means to someone watching, or None for routine ones."""
    kind = event.get("kind")
    if not isinstance(kind, str):  # a stranger's payload: nothing to say (nor to hash)
        return None
    if kind in _WIN_KINDS:
        return _win_line(kind, event)
    if kind in _TABLE_KINDS:
        return _table_line(kind, event)
    match kind:
        case "round_locked":
            seats = ", ".join(str(s) for s in event.get("seats", []))
            return f"round {event.get('round')}: LOCK - wagers on seats {seats or 'none'}"
        case "round_reconciled":
            pays = event.get("settlement", [])
            total = sum(p.get("cents", 0) for p in pays if isinstance(p, dict))
            return f"round {event.get('round')} reconciled: {len(pays)} pays, {money(total)}"
        case "round_voided":
            return f"round {event.get('round')} voided by {event.get('by')}"
        case "late_bet":
            seat = event.get("seat")
            return f"late bet at seat {seat} after LOCK (present: {event.get('present')})"
    return None


def _win_line(kind: str, event: dict[str, Any]) -> str | None:
    """A winning hand keyed or turned off, a meter award and what became of it, an envy bonus."""
    seat, hand = event.get("seat"), event.get("hand")
    cents = money(event.get("cents"))
    match kind:
        case "hand_keyed":
            if event.get("source") == "tray":
                return f"seat {seat} keyed {hand}: pays {cents} from the tray"
            return f"seat {seat} keyed {hand}"
        case "hand_unkeyed":
            return f"seat {seat} {hand} turned off: a keying mistake undone, nothing paid for it"
        case "award_keyed":
            return (
                f"seat {seat} keyed {hand}: {cents} from meter {event.get('meter')} "
                f"(meter now {money(event.get('meter_after_cents'))}); awaiting the supervisor"
            )
        case "award_confirmed":
            return f"supervisor confirmed seat {seat}'s {hand} award of {cents}"
        case "award_rejected" | "award_unkeyed" | "award_reversed":
            return (
                f"seat {seat} {hand} award of {cents} {event.get('reason')}: meter back to "
                f"{money(event.get('meter_after_cents'))}"
            )
        case "envy":
            return (
                f"ENVY bonus: seat {seat} gets {cents} because seat {event.get('from_seat')} "
                f"hit {hand}"
            )
    return None


def _table_line(kind: str, event: dict[str, Any]) -> str | None:
    """The daemon's refusals, the progressive closed or open, the board on or off line."""
    match kind:
        case "key_refused":
            return f"daemon refused key {event.get('code')}: {event.get('reason')}"
        case "command_rejected":
            return f"daemon rejected {event.get('command')}: {event.get('reason')}"
        case "table_closed":
            return f"progressive closed ({event.get('reason')})"
        case "table_opened":
            return "progressive open"
        case "board_online" | "board_offline":
            state = kind.split("_")[1]
            return f"board {state}" + (f" ({event['reason']})" if event.get("reason") else "")
    return None


def daemon_problem(line: str) -> str | None:
    """A daemon log line at warning level or worse, shortened for the screen; else None."""
    try:
        record = json.loads(line[line.find("{") :]) if "{" in line else None
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    level = str(record.get("level", "")).lower()
    what = str(record.get("event", ""))
    if level not in ("warning", "error", "critical") or what in _QUIET_DAEMON_WARNINGS:
        return None
    skip = {"event", "level", "timestamp", "logger", "table"}
    details = " ".join(f"{k}={v}" for k, v in record.items() if k not in skip)
    return f"daemon {level}: {what}" + (f" ({details})" if details else "")


def tee_lines(
    stream: IO[str],
    log: IO[str],
    show: Callable[[str], str | None],
    say: Callable[[str], None],
    log_lock: threading.Lock,
) -> threading.Thread:
    """Copy ``stream`` to ``log`` line by line and ``say`` what ``show`` makes of each line.

    ``log_lock`` is shared by the threads that write one log (a process's stdout and stderr).
    """

    def pump() -> None:
        for line in stream:
            with log_lock:
                log.write(line)
                log.flush()
            shown = show(line.rstrip("\n"))
            if shown:
                say(shown)

    thread = threading.Thread(target=pump, name="tee", daemon=True)
    thread.start()
    return thread
