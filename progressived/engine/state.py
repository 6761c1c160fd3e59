"""The engine's state: immutable, rebuilt by folding events (see ``core.evolve``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from progressived.engine.events import Postings

if TYPE_CHECKING:
    from collections.abc import Mapping


class Phase(enum.StrEnum):
    OPEN = "open"  # taking bets; LOCK starts the round
    LOCKED = "locked"  # wagers locked, cards out; keying winners


class Light(enum.StrEnum):
    """The light a seat's sensor shows. Contract with the board protocol."""

    IDLE = "idle"
    BET = "bet"
    LOCKED = "locked"
    WINNER = "winner"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class KeyedHand:
    """A tray or envy-only hand keyed this round."""

    seat: int
    hand: str
    source: str  # tray | none
    units: int


@dataclass(frozen=True, slots=True)
class MeterAward:
    """A meter award in the round's recorded order, with the postings that keyed it."""

    seat: int
    hand: str
    meter: str
    units: int
    meter_before: int
    postings: Postings
    confirmed: bool = False
    share_of: int = 1


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

    def winner_seats(self) -> frozenset[int]:
        return frozenset(k.seat for k in self.keyed) | frozenset(a.seat for a in self.awards)


def lights(state: TableState, seats: int) -> dict[int, Light]:
    """The light every seat should show in this state (a pure function of the state)."""
    out: dict[int, Light] = {}
    winners = state.winner_seats()
    for seat in range(1, seats + 1):
        if state.closed and state.phase is Phase.OPEN:
            out[seat] = Light.CLOSED
        elif state.phase is Phase.OPEN:
            out[seat] = Light.BET if seat in state.sensed else Light.IDLE
        elif seat in winners:
            out[seat] = Light.WINNER
        elif seat in state.locked:
            out[seat] = Light.LOCKED
        else:
            out[seat] = Light.IDLE
    return out
