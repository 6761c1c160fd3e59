"""The engine's state: immutable, rebuilt by folding events (see ``core.evolve``).

One record holds both aggregates' state, since one ledger journals them: the round's
(phase, seats, keyed hands, award receipts, requests awaiting the meter) and the local
meter book's (``balances``, ``opened``). The board's lights are computed from it outside
the engine (:mod:`progressived.board.lights`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from operator import attrgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from progressived.engine.events import Postings
from progressived.engine.meter_requests import MeterAward, ReserveAwards

if TYPE_CHECKING:
    from collections.abc import Mapping

    from progressived.engine.meter_requests import MeterRequest


# The reason a table closes its linked progressive when the link stops answering:
# LOCK still locks the local meters; a round locked while it holds sends no contribution
# and its claims on a linked meter are refused.
LINK_DOWN = "link-down"
# The reason's prefix when the link refused a message in a way resending cannot cure (its
# configuration and the table's disagree): ``link refused: unknown-meter``. It closes the
# linked progressive as ``link-down`` does, until an operator opens it again.
LINK_REFUSED = "link refused: "


def is_link_closure(reason: str) -> bool:
    """Whether ``reason`` closes the linked meters only (the local ones keep playing)."""
    return reason == LINK_DOWN or reason.startswith(LINK_REFUSED)


def link_closures(closed: frozenset[str]) -> frozenset[str]:
    """The closures of ``closed`` that close the linked meters only."""
    return frozenset(r for r in closed if is_link_closure(r))


class Phase(enum.StrEnum):
    OPEN = "open"  # taking bets; LOCK starts the round
    LOCKED = "locked"  # wagers locked, cards out; keying winners


@dataclass(frozen=True, slots=True)
class KeyedHand:
    """A tray or envy-only hand keyed this round."""

    seat: int
    hand: str
    source: str  # tray | none
    units: int


def _empty() -> Mapping[str, int]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class TableState:
    """Everything the engine knows. Balances are the postings of every event folded."""

    round: int = 1
    phase: Phase = Phase.OPEN
    sensed: frozenset[int] = frozenset()
    locked: frozenset[int] = frozenset()
    wager_postings: tuple[tuple[int, Postings], ...] = ()
    keyed: tuple[KeyedHand, ...] = ()
    awards: tuple[MeterAward, ...] = ()
    same_player: tuple[frozenset[int], ...] = ()
    closed: frozenset[str] = frozenset()
    balances: Mapping[str, int] = field(default_factory=_empty)
    opened: frozenset[str] = frozenset()  # meters funded
    # Split policy: awards the supervisor approved, paid at RECONCILE: (seat, hand, by).
    approved: tuple[tuple[int, str, str], ...] = ()
    # Meter requests the meter book has not answered yet (a deferred meter port only; the
    # local book answers at once, so this is always empty there).
    awaiting: tuple[MeterRequest, ...] = ()
    # This round was locked while the link was down: no linked wagers, no linked claims.
    linked_off: bool = False

    def balance(self, account: str) -> int:
        return self.balances.get(account, 0)

    @property
    def pending(self) -> tuple[MeterAward, ...]:
        return tuple(a for a in self.awards if not a.confirmed)

    def is_approved(self, seat: int, hand: str) -> bool:
        return any((s, h) == (seat, hand) for s, h, _ in self.approved)

    @property
    def unpaid(self) -> tuple[MeterAward, ...]:
        """Awards whose amount is still held in ``award_pending`` (repriceable): those awaiting
        the supervisor and, under ``split``, those approved but not yet paid."""
        return tuple(a for a in self.awards if not a.confirmed or self.is_approved(a.seat, a.hand))

    def meter_pending(self, meter_id: str) -> bool:
        return any(a.meter == meter_id for a in self.pending)

    def player_of(self, seat: int) -> frozenset[int]:
        """The spots played by the same player as ``seat`` (including it)."""
        for group in self.same_player:
            if seat in group:
                return group
        return frozenset({seat})

    @property
    def claims_awaiting_meter(self) -> tuple[tuple[int, str], ...]:
        """Meter hands keyed but not yet priced by the meter book: pending, not payable."""
        return tuple(
            (c.seat, c.hand)
            for r in self.awaiting
            if isinstance(r, ReserveAwards)
            for c in r.claims
        )

    def winner_seats(self) -> frozenset[int]:
        """Seats keyed this round: tray hands, priced awards and claims awaiting the meter."""
        claimed = frozenset(seat for seat, _ in self.claims_awaiting_meter)
        return (
            frozenset(k.seat for k in self.keyed) | frozenset(a.seat for a in self.awards) | claimed
        )


_FIELD_NAMES = tuple(f.name for f in fields(TableState))
_FIELD_VALUES = attrgetter(*_FIELD_NAMES)
# Each field's slot, set directly (what a frozen dataclass's own __init__ does through
# ``object.__setattr__``, without looking the slot up by name each time).
_SLOTS: dict[str, Callable[[TableState, Any], None]] = {
    name: TableState.__dict__[name].__set__ for name in _FIELD_NAMES
}
_SET_ALL = tuple(_SLOTS.values())  # in the order of _FIELD_NAMES


def replaced(state: TableState, **changes: Any) -> TableState:
    """``dataclasses.replace(state, **changes)``, without its walk of ``fields()`` and its
    keyword ``__init__`` on every call: the engine builds one state per event, and
    ``replace`` was a fifth of a linked contribution's decision. Same result; a name that
    is not a field is refused (TypeError) as ``replace`` refuses it."""
    out = object.__new__(TableState)
    for put, value in zip(_SET_ALL, _FIELD_VALUES(state), strict=True):
        put(out, value)
    for name, value in changes.items():
        slot = _SLOTS.get(name)
        if slot is None:
            raise TypeError(f"TableState has no field {name!r}")
        slot(out, value)
    return out


_SET_BALANCES = _SLOTS["balances"]


def with_balances(state: TableState, balances: Mapping[str, int]) -> TableState:
    """``replaced(state, balances=balances)`` without the keyword call: every event's
    postings move the balances, most events nothing else (evolve's hot path)."""
    out = object.__new__(TableState)
    for put, value in zip(_SET_ALL, _FIELD_VALUES(state), strict=True):
        put(out, value)
    _SET_BALANCES(out, balances)
    return out
