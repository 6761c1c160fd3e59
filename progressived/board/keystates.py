"""The keypad's vocabulary: what a key means on a table, and the states of a pending sequence.

Types, not strings: a key is one :data:`Action` (a :class:`Function` key, a seat's, a hand's),
and a sequence waiting for its next key is one :data:`Pending` state carrying what that key
needs (the seat, the seats so far, whether the supervisor authorised). The interpreter
(:mod:`progressived.board.keypad`) has one handler per state and matches them exhaustively:
a state added here and forgotten there is a type error (``assert_never``), not a key that
silently does nothing. The names the dealer's display shows (``SAME-PLAYER``, ``SEAT``) are
the values here, unchanged.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import assert_never


class Function(enum.StrEnum):
    """A key with a fixed meaning (the value is the name the dealer's display shows)."""

    LOCK = "LOCK"
    SUPERVISOR = "SUPERVISOR"
    CONFIRM = "CONFIRM"
    REJECT = "REJECT"
    VOID = "VOID"
    SAME_PLAYER = "SAME-PLAYER"
    RECONCILE = "RECONCILE"
    CLEAR = "CLEAR"


@dataclass(frozen=True, slots=True)
class SeatKey:
    """A seat's key (``seat`` counts from 1)."""

    seat: int


@dataclass(frozen=True, slots=True)
class HandKey:
    """The key of a hand of this table's paytable."""

    hand: str


@dataclass(frozen=True, slots=True)
class OtherHandKey:
    """The key of a hand the keypad map knows but this table's paytable does not."""

    hand: str


Action = Function | SeatKey | HandKey | OtherHandKey
"""What a key code means on this table."""


def label(action: Action) -> str:
    """The key's name as the dealer's display says it (``SEAT``, ``HAND``, ``LOCK``, ...)."""
    match action:
        case Function():
            return action.value
        case SeatKey():
            return "SEAT"
        case HandKey():
            return "HAND"
        case OtherHandKey():
            return "OTHER-HAND"
        case _:
            assert_never(action)


# The pending sequence: each state carries what its next key needs. ``since`` is the time
# of the key that started (or last extended) it, None when the board's time did not parse.


@dataclass(frozen=True, slots=True)
class AfterSeat:
    """SEATn pressed: waits for the hand key."""

    since: datetime | None
    seat: int


@dataclass(frozen=True, slots=True)
class SamePlayerSeats:
    """SAME pressed: collects seat keys until SAME (or CONFIRM)."""

    since: datetime | None
    seats: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class AfterVoid:
    """VOID pressed: waits for CONFIRM; ``supervisor``: authorised when VOID was pressed."""

    since: datetime | None
    supervisor: bool


@dataclass(frozen=True, slots=True)
class AfterSupervisor:
    """The supervisor's button pressed: authorises the next CONFIRM, REJECT or VOID."""

    since: datetime | None


Pending = AfterSeat | SamePlayerSeats | AfterVoid | AfterSupervisor
"""A key sequence waiting for its next key."""


def describe(pending: Pending) -> str:
    """The pending sequence as the dealer's display names it."""
    match pending:
        case AfterSeat():
            return f"SEAT {pending.seat}"
        case SamePlayerSeats():
            return "SAME-PLAYER"
        case AfterVoid():
            return "VOID"
        case AfterSupervisor():
            return "SUPERVISOR"
        case _:
            assert_never(pending)
