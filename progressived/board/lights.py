"""The board's vocabulary: the light each seat shows, computed from the engine's state.

Lights are a contract with the board protocol (docs/protocol.md), not a rule of the round,
so they live on the adapter side: the engine exposes what they are computed from (the
phase, the sensed and locked seats, the winners keyed -- claims awaiting the meter
included -- and the reasons the progressive is closed).
"""

from __future__ import annotations

import enum

from progressived.engine.state import Phase, TableState


class Light(enum.StrEnum):
    """The light a seat's sensor shows. Contract with the board protocol."""

    IDLE = "idle"
    BET = "bet"
    LOCKED = "locked"
    WINNER = "winner"
    CLOSED = "closed"


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
