"""What a sign makes of a table's events: one reading for the terminal and the web sign.

A table publishes its events on ``<prefix>/table/<id>/event`` (docs/mqtt.md). Both signs
read them here, the same way, as docs/mqtt.md says a sign must:

* :func:`read_event` checks an event ("Malformed messages": an integer ``seq``, the topic's
  ``table``, every key its kind requires, each of the type the schema says) and turns the
  ``kind`` a sign acts on into a type, :class:`Shows` (what the event means on a sign);
  a sign decides what to draw from that type, never from a message's text;
* :class:`SeenEvents` recognises a redelivery (the same ledger ``seq``) with a bounded
  memory: the last :data:`SEEN_EVENTS_KEPT` events of a table;
* :class:`IgnoredLog` says that malformed messages were ignored, at most one line every
  :data:`IGNORED_EVERY_S` with how many more there were (the one log throttle).

Pure but for the clock :class:`IgnoredLog` reads (injected).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from progressived.mqtt.payloads import event_problem
from progressived.runtime.ratelimit import RateLimitedLog

__all__ = [
    "IGNORED_EVERY_S",
    "SEEN_EVENTS_KEPT",
    "IgnoredLog",
    "Malformed",
    "SeenEvents",
    "Shows",
    "SignEvent",
    "read_event",
]

SEEN_EVENTS_KEPT = 4096  # recent event seqs remembered per table, to drop redeliveries
IGNORED_EVERY_S = 10.0  # at most one line about ignored malformed messages this often


class Shows(enum.Enum):
    """What an event means on a sign; the value is its ``kind`` on the wire (docs/mqtt.md).
    An event of any other kind changes nothing on a sign."""

    PENDING = "award_keyed"  # an award awaits the supervisor
    APPROVED = "award_approved"  # split: approved (paid and final at RECONCILE), never WINNER
    WINNER = "award_confirmed"  # paid: the winner banner
    REJECTED = "award_rejected"  # the supervisor rejected it: it awaits no one any more
    UNKEYED = "award_unkeyed"  # keyed by mistake and turned off
    REVERSED = "award_reversed"  # repriced or voided
    NEXT_ROUND = "round_locked"  # the table's next round: last round's banner and envy go
    ENVY = "envy"  # an envy bonus paid this round
    CLOSED = "table_closed"  # the progressive closed here, for ``reason``
    OPENED = "table_opened"  # the closure for ``reason`` ended


_BY_KIND = {shows.value: shows for shows in Shows}
_STRINGS = ("hand", "meter", "reason")
_INTEGERS = ("round", "seat", "cents", "from_seat")


class Malformed(ValueError):
    """A message a sign must ignore (the words say why, for the ignored-message line)."""


@dataclass(frozen=True, slots=True)
class SignEvent:
    """An event as a sign reads it (the fields its kind does not carry are empty)."""

    shows: Shows
    seq: int
    table: str
    round: int
    seat: int
    meter: str = ""
    hand: str = ""
    cents: int = 0
    from_seat: int = 0
    reason: str = ""

    @property
    def award(self) -> tuple[str, int, str]:
        """Which award it names: (meter, seat, hand)."""
        return self.meter, self.seat, self.hand


def read_event(data: Mapping[str, Any], table_id: str) -> SignEvent | None:
    """The event on ``table_id``'s topic as a sign reads it; None for a kind a sign does not
    show (not an error: ignored without a line); :class:`Malformed` if a sign must ignore it
    (docs/mqtt.md, "Malformed messages": never filled in with defaults)."""
    if problem := event_problem(data, table_id):
        raise Malformed(problem)
    shows = _BY_KIND.get(data["kind"]) if isinstance(data.get("kind"), str) else None
    if shows is None:
        return None
    kind = shows.value
    for key in _STRINGS:
        if key in data and not isinstance(data[key], str):
            raise Malformed(f"a {kind} event whose {key} is not a string")
    for key in _INTEGERS:
        if key in data and type(data[key]) is not int:
            raise Malformed(f"a {kind} event whose {key} is not an integer")
    return SignEvent(
        shows,
        data["seq"],
        table_id,
        data["round"],
        data["seat"],
        meter=data.get("meter", ""),
        hand=data.get("hand", ""),
        cents=data.get("cents", 0),
        from_seat=data.get("from_seat", 0),
        reason=data.get("reason", ""),
    )


class SeenEvents:
    """The ledger seqs of a table's events already shown: the last ``kept`` of them, so a
    redelivery after a reconnect is not shown twice and the memory stays bounded."""

    def __init__(self, kept: int = SEEN_EVENTS_KEPT) -> None:
        self.kept = kept
        self._seqs: dict[int, None] = {}  # insertion-ordered: the oldest first

    def first(self, seq: int) -> bool:
        """Whether ``seq`` is new (it is then remembered, the oldest forgotten if full)."""
        if seq in self._seqs:
            return False
        self._seqs[seq] = None
        if len(self._seqs) > self.kept:
            del self._seqs[next(iter(self._seqs))]
        return True

    def __len__(self) -> int:
        return len(self._seqs)

    def __contains__(self, seq: object) -> bool:
        return seq in self._seqs


class IgnoredLog:
    """``sign: ignored a malformed message on TOPIC: WHY (N more since the last line)``, at
    most once every ``every_s`` (docs/mqtt.md, "Malformed messages")."""

    def __init__(
        self,
        say: Callable[[str], None],
        every_s: float = IGNORED_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.say = say
        self.limit = RateLimitedLog(1, every_s, clock=clock)

    def ignored(self, topic: str, why: str) -> bool:
        """One malformed message on ``topic``; True when the line was said."""
        held = self.limit.admit()
        if held is None:
            return False
        more = f" ({held} more since the last line)" if held else ""
        self.say(f"sign: ignored a malformed message on {topic}: {why}{more}")
        return True

    @property
    def held(self) -> int:
        """Malformed messages not said yet (told with the next line)."""
        return self.limit.held()
