"""The outcome of a command: accepted with the events it caused, or rejected with a reason."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

from progressived.engine.events import Event
from progressived.engine.state import TableState


class RejectCode(enum.StrEnum):
    """Why the engine refused a command: what callers match on, never the reason's words.

    The value is the wire string: the ``code`` of the journaled ``command_rejected`` event
    (docs/mqtt.md) and the ``code`` label of ``progressive_commands_rejected``
    (docs/engine.md, "Rejection codes", says when each is given).
    """

    ALREADY_LOCKED = "already-locked"
    AWARD_CONFIRMED = "award-confirmed"
    AWARD_PENDING = "award-pending"
    BAD_AMOUNT = "bad-amount"
    BAD_COUNT = "bad-count"
    BAD_HAND = "bad-hand"
    BAD_METER = "bad-meter"
    BAD_SEAT = "bad-seat"
    BAD_SOURCE = "bad-source"
    CLOSED = "closed"
    IMPOSSIBLE_COMBINATION = "impossible-combination"
    LINK_CLOSED = "link-closed"
    METER_PENDING = "meter-pending"
    NO_APPROVAL = "no-approval"
    NO_OPERATOR = "no-operator"
    NO_REASON = "no-reason"
    NO_WAGER = "no-wager"
    NOT_LOCKED = "not-locked"
    NOTHING_PENDING = "nothing-pending"
    ROUND_OPEN = "round-open"
    SEAT_ALREADY_KEYED = "seat-already-keyed"
    SUPERVISOR_REQUIRED = "supervisor-required"
    TOO_MANY_HANDS = "too-many-hands"
    UNEXPECTED_ANSWER = "unexpected-answer"
    UNKNOWN_COMMAND = "unknown-command"


@dataclass(frozen=True, slots=True)
class Accepted:
    """The command was applied: ``events`` happened and ``state`` is the result."""

    events: tuple[Event, ...]
    state: TableState
    accepted: Literal[True] = True


@dataclass(frozen=True, slots=True)
class Rejected:
    """The command does not fit: ``reason`` says why (for the dealer), ``code`` what to
    match on; nothing changed."""

    reason: str
    code: RejectCode
    state: TableState
    accepted: Literal[False] = False


Decision = Accepted | Rejected
