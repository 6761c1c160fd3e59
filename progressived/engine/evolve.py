"""evolve: fold one event into the state, so a state is exactly the replay of its events.

The postings of every event go into the balances (the local meter book's state); the
round's fields follow the event kinds. A meter book's answer (``WagerLocked``,
``AwardKeyed``, ...) also clears the request it answers from ``awaiting``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import assert_never

from progressived.engine import accounts
from progressived.engine.events import (
    AwardApproved,
    AwardConfirmed,
    AwardKeyed,
    AwardReversed,
    EnvyPaid,
    Event,
    HandKeyed,
    HandUnkeyed,
    LateBet,
    LinkedContribution,
    MeterAdjusted,
    MeterOpened,
    MeterTransferred,
    RoundLocked,
    RoundReconciled,
    RoundVoided,
    SensorsChanged,
    SpotsJoined,
    TableClosed,
    TableOpened,
    TrayPaid,
    WagerLocked,
    WagerRefunded,
)
from progressived.engine.meter_port import (
    ClaimRefused,
    Contribute,
    MeterRequest,
    MeterRequested,
    PostAward,
    RefundContribution,
    ReserveAwards,
    VoidAward,
)
from progressived.engine.meter_requests import MeterAward
from progressived.engine.state import KeyedHand, Phase, TableState, link_closures, with_balances

# Events that move money only: no case of ``evolve`` below matches them and no meter request
# is answered by them (``_answers``), so their state is the old one with the postings
# folded. The hot path (a linked contribution per wager) skips the match for them.
_BALANCES_ONLY = frozenset(
    {LateBet, LinkedContribution, TrayPaid, EnvyPaid, MeterAdjusted, MeterTransferred}
)


def _new_round(state: TableState) -> TableState:
    return replace(
        state,
        round=state.round + 1,
        phase=Phase.OPEN,
        locked=frozenset(),
        wager_postings=(),
        keyed=(),
        awards=(),
        same_player=(),
        approved=(),
        linked_off=False,
    )


def _answers(request: MeterRequest, event: Event) -> bool:
    """Whether ``event`` is the meter book's answer to ``request``."""
    seat = event.seat
    hand = getattr(event, "hand", None)
    match request:
        case Contribute():
            return isinstance(event, WagerLocked) and request.seat == seat
        case ReserveAwards():
            return isinstance(event, AwardKeyed | ClaimRefused) and any(
                (c.seat, c.hand) == (seat, hand) for c in request.claims
            )
        case PostAward():
            return isinstance(event, AwardConfirmed | ClaimRefused) and (
                request.award.seat,
                request.award.hand,
            ) == (seat, hand)
        case VoidAward():
            return isinstance(event, AwardReversed) and (
                request.award.seat,
                request.award.hand,
            ) == (seat, hand)
        case RefundContribution():
            return isinstance(event, WagerRefunded) and request.seat == seat
    return False


def _answered(state: TableState, event: Event) -> TableState:
    """``state`` without the request ``event`` answers (a split group: without that claim)."""
    for index, request in enumerate(state.awaiting):
        if _answers(request, event):
            rest: tuple[MeterRequest, ...] = ()
            if isinstance(request, ReserveAwards):
                hand = getattr(event, "hand", None)
                claims = tuple(c for c in request.claims if (c.seat, c.hand) != (event.seat, hand))
                rest = (replace(request, claims=claims),) if claims else ()
            awaiting = (*state.awaiting[:index], *rest, *state.awaiting[index + 1 :])
            return replace(state, awaiting=awaiting)
    return state


def evolve(state: TableState, event: Event) -> TableState:
    """Fold one event into the state (pure; used for replay and by ``decide``)."""
    state = with_balances(state, accounts.post(state.balances, event.postings))
    if type(event) in _BALANCES_ONLY:
        return state
    # A kind given a case below must leave _BALANCES_ONLY (tests/test_engine_shortcuts.py
    # compares both paths over every kind a round emits).
    if state.awaiting:
        state = _answered(state, event)
    match event:
        case MeterOpened(meter=meter_id):
            return replace(state, opened=state.opened | {meter_id})
        case MeterRequested(request=request):
            return replace(state, awaiting=(*state.awaiting, request))
        case RoundLocked(seats=seats):
            off = bool(link_closures(state.closed))
            return replace(state, phase=Phase.LOCKED, locked=frozenset(seats), linked_off=off)
        case AwardKeyed() | AwardReversed() | AwardConfirmed() | AwardApproved() | ClaimRefused():
            return _evolve_award(state, event)
        case (
            SensorsChanged()
            | WagerLocked()
            | WagerRefunded()
            | HandKeyed()
            | HandUnkeyed()
            | SpotsJoined()
        ):
            return _evolve_seat(state, event)
        case RoundReconciled() | RoundVoided():
            return _new_round(state)
        case TableClosed(reason=reason):
            return replace(state, closed=state.closed | {reason})
        case TableOpened(reason=reason):
            return replace(state, closed=state.closed - {reason})
    return state


def _evolve_award(
    state: TableState,
    event: AwardKeyed | AwardReversed | AwardConfirmed | AwardApproved | ClaimRefused,
) -> TableState:
    """A meter award keyed, reversed, confirmed or approved, or its claim refused."""
    match event:
        case AwardKeyed():
            award = MeterAward(
                seat=event.seat,
                hand=event.hand,
                meter=event.meter,
                units=event.units,
                meter_before=event.meter_before,
                postings=event.postings,
                share_of=event.share_of,
                # A split award approved by the supervisor stays approved when repriced.
                confirmed=state.is_approved(event.seat, event.hand),
            )
            return replace(state, awards=(*state.awards, award))
        case AwardReversed(seat=seat, hand=hand):
            remaining = list(state.awards)
            for index in range(len(remaining) - 1, -1, -1):
                if (remaining[index].seat, remaining[index].hand) == (seat, hand):
                    del remaining[index]
                    break
            return replace(state, awards=tuple(remaining))
        case AwardConfirmed(seat=seat, hand=hand) | AwardApproved(seat=seat, hand=hand):
            awards = tuple(
                replace(a, confirmed=True) if (a.seat, a.hand) == (seat, hand) else a
                for a in state.awards
            )
            approved = tuple(a for a in state.approved if (a[0], a[1]) != (seat, hand))
            if isinstance(event, AwardApproved):
                approved = (*approved, (seat, hand, event.by))
            return replace(state, awards=awards, approved=approved)
        case ClaimRefused(seat=seat, hand=hand):  # a refused confirmation drops the award
            awards = tuple(a for a in state.awards if (a.seat, a.hand) != (seat, hand))
            return replace(state, awards=awards)
        case _:
            assert_never(event)


def _evolve_seat(
    state: TableState,
    event: SensorsChanged | WagerLocked | WagerRefunded | HandKeyed | HandUnkeyed | SpotsJoined,
) -> TableState:
    """The seats sensed, a seat's wager locked or refunded, a hand keyed or turned off, spots
    joined as one player."""
    match event:
        case SensorsChanged(present=present):
            return replace(state, sensed=frozenset(present))
        case WagerLocked(seat=seat, postings=postings):
            return replace(state, wager_postings=(*state.wager_postings, (seat, postings)))
        case WagerRefunded(seat=seat):
            kept = tuple(w for w in state.wager_postings if w[0] != seat)
            return replace(state, wager_postings=kept, locked=state.locked - {seat})
        case HandKeyed(seat=seat, hand=hand, source=source, units=units):
            return replace(state, keyed=(*state.keyed, KeyedHand(seat, hand, source, units)))
        case HandUnkeyed(seat=seat, hand=hand):
            keyed = tuple(k for k in state.keyed if (k.seat, k.hand) != (seat, hand))
            return replace(state, keyed=keyed)
        case SpotsJoined(seats=seats):
            group = frozenset(seats)
            others = tuple(g for g in state.same_player if not g & group)
            return replace(state, same_player=(*others, group))
        case _:
            assert_never(event)
