"""The outcome of a command: accepted with the events it caused, or rejected with a reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from progressived.engine.events import Event
from progressived.engine.state import TableState


@dataclass(frozen=True, slots=True)
class Accepted:
    """The command was applied: ``events`` happened and ``state`` is the result."""

    events: tuple[Event, ...]
    state: TableState
    accepted: Literal[True] = True


@dataclass(frozen=True, slots=True)
class Rejected:
    """The command does not fit: ``reason`` says why (for the dealer); nothing changed."""

    reason: str
    code: str
    state: TableState
    accepted: Literal[False] = False


Decision = Accepted | Rejected
