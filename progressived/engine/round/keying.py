"""Keying winners and the supervisor: claims on a meter, CONFIRM, REJECT, repricing.

The round decides *which* claims stand and in what order (seat order, split groups); the
meter book prices them. A change ahead in the order voids the awards from there on
(last first) and reserves them again, so every meter movement is an exact recorded posting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from progressived.core.params import Policy, TableParams
from progressived.core.paytable import HandRule
from progressived.engine import deck
from progressived.engine.commands import Confirm, KeyHand, Reject
from progressived.engine.decision import RejectCode, Rejected
from progressived.engine.events import AwardApproved, HandKeyed, HandUnkeyed
from progressived.engine.meter_port import Claim, PostAward, ReserveAwards, VoidAward
from progressived.engine.round.plan import (
    Plan,
    Step,
    awaiting_error,
    seat_error,
    supervisor_error,
)
from progressived.engine.state import Phase, TableState


def key(params: TableParams, state: TableState, cmd: KeyHand) -> Rejected | Plan:
    """KeyHand: a second press turns a keyed hand off; otherwise a new winner is keyed."""
    if error := seat_error(params, cmd.seat, state):
        return error
    paytable = params.paytable
    rule = paytable.rule_for(cmd.hand)
    if rule is None:
        return Rejected(
            f"hand {cmd.hand!r} is not in paytable {paytable.id} "
            f"(hands: {', '.join(paytable.hand_ids)})",
            RejectCode.BAD_HAND,
            state,
        )
    if state.phase is not Phase.LOCKED:
        return Rejected("no round is locked: key winners after LOCK", RejectCode.NOT_LOCKED, state)
    seat, hand = cmd.seat, rule.hand.value
    turned_off = _turn_off(params, state, cmd, seat, hand)
    if turned_off is not None:
        return turned_off
    return _new_winner(params, state, cmd, rule, seat, hand)


def _turn_off(
    params: TableParams, state: TableState, cmd: KeyHand, seat: int, hand: str
) -> Rejected | Plan | None:
    """A second press of the same seat and hand turns it off (None: it is not keyed)."""
    for keyed in state.keyed:
        if (keyed.seat, keyed.hand) == (seat, hand):
            unkeyed = HandUnkeyed(
                at=cmd.at,
                round=state.round,
                seat=seat,
                hand=hand,
                source=keyed.source,
                units=keyed.units,
            )
            return (unkeyed,)
    for award in state.awards:
        if (award.seat, award.hand) == (seat, hand):
            if award.confirmed:
                return Rejected(
                    f"the {hand} award at seat {seat} was confirmed by the supervisor; "
                    "it cannot be turned off",
                    RejectCode.AWARD_CONFIRMED,
                    state,
                )
            if error := awaiting_error(state, "turning a meter hand off"):
                return error
            wanted = [(a.seat, a.hand) for a in state.unpaid if (a.seat, a.hand) != (seat, hand)]
            return reprice(params, state, wanted, cmd.at, {(seat, hand): "unkeyed"})
    return None


def _new_winner(
    params: TableParams, state: TableState, cmd: KeyHand, rule: HandRule, seat: int, hand: str
) -> Rejected | Plan:
    """A new winner: refuse what one deck cannot deal, then key it (on the tray, on a meter,
    or as an envy trigger)."""
    if error := _undealable(params, state, seat, hand):
        return error
    if seat not in state.locked:
        return _without_wager(params, state, cmd, rule, seat, hand)
    if rule.pay.from_meter:
        if state.linked_off and params.is_linked(rule.pay.meter):
            return Rejected(
                f"round {state.round} was locked while the linked progressive was closed (the "
                f"link down or refusing): its {hand} claim on linked meter {rule.pay.meter} is "
                "refused",
                RejectCode.LINK_CLOSED,
                state,
            )
        if error := awaiting_error(state, f"keying {hand}"):
            return error
        wanted = [(a.seat, a.hand) for a in state.unpaid] + [(seat, hand)]
        return reprice(params, state, wanted, cmd.at, {})
    units = rule.pay.tray_amount(params.wager_units, params.paytable.wager)
    return (
        HandKeyed(at=cmd.at, round=state.round, seat=seat, hand=hand, source="tray", units=units),
    )


def _undealable(params: TableParams, state: TableState, seat: int, hand: str) -> Rejected | None:
    """A seat keyed already, or a set of hands one deck cannot deal."""
    paytable = params.paytable
    current = (
        [k.hand for k in state.keyed if k.seat == seat]
        + [a.hand for a in state.awards if a.seat == seat]
        + [h for s, h in state.claims_awaiting_meter if s == seat]
    )
    if current:
        return Rejected(
            f"seat {seat} is already keyed as {current[0]}; press {current[0]} again to turn it "
            "off first",
            RejectCode.SEAT_ALREADY_KEYED,
            state,
        )
    guard = deck.guard_for(paytable)
    held = (
        [k.hand for k in state.keyed]
        + [a.hand for a in state.awards]
        + [h for _, h in state.claims_awaiting_meter]
    )
    if (impossible := guard.impossible([*held, hand])) is not None:
        return Rejected(guard.reason(impossible), RejectCode.IMPOSSIBLE_COMBINATION, state)
    return None


def _without_wager(
    params: TableParams, state: TableState, cmd: KeyHand, rule: HandRule, seat: int, hand: str
) -> Rejected | Plan:
    """A winner at a seat without a locked wager: only an envy trigger, where the paytable
    lets one trigger without a wager."""
    paytable = params.paytable
    if rule.envy and not paytable.envy_requires_trigger_wager:
        return (
            HandKeyed(at=cmd.at, round=state.round, seat=seat, hand=hand, source="none", units=0),
        )
    why = (
        "it has no envy bonus"
        if not rule.envy
        else f"the trigger must hold a wager ({paytable.envy_rule})"
    )
    return Rejected(
        f"seat {seat} has no locked progressive wager; {hand} there pays nothing and cannot "
        f"trigger envy: {why}",
        RejectCode.NO_WAGER,
        state,
    )


def ordered(params: TableParams, wanted: Sequence[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Claims as groups in handling order.

    Sequential: one award per group, by seat in the configured order. Split: awards for
    the same hand and meter form one group, handled at the turn of its first member.
    """
    by_seat = sorted(wanted, key=lambda sh: params.order_key(sh[0]))
    if params.policy is Policy.SEQUENTIAL:
        return [[sh] for sh in by_seat]
    groups: list[list[tuple[int, str]]] = []
    index: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for seat, hand in by_seat:
        rule = params.paytable.rule_for(hand)
        assert rule is not None
        group_key = (hand, rule.pay.meter)
        if group_key not in index:
            index[group_key] = []
            groups.append(index[group_key])
        index[group_key].append((seat, hand))
    return groups


def _claim(params: TableParams, seat: int, hand: str) -> Claim:
    rule = params.paytable.rule_for(hand)
    assert rule is not None
    return Claim(seat=seat, hand=hand, meter=rule.pay.meter)


def reprice(
    params: TableParams,
    state: TableState,
    wanted: Sequence[tuple[int, str]],
    at: str,
    reasons: Mapping[tuple[int, str], str],
) -> Plan:
    """Bring the unpaid meter awards to ``wanted`` (a set of seat/hand pairs).

    Awards keep their reserved amounts unless something ahead of them in the order changed;
    from the first difference on, the old awards are voided last-first and reserved again
    on the meter as it then stands.
    """
    old = state.unpaid
    confirmed = len(state.awards) - len(old)
    groups = ordered(params, wanted)
    new_flat = [(sh, len(g), g[0]) for g in groups for sh in g]
    old_flat = [((a.seat, a.hand), a.share_of) for a in old]
    # The first place where the order or a split group differs.
    keep = 0
    while (
        keep < len(old_flat)
        and keep < len(new_flat)
        and old_flat[keep][0] == new_flat[keep][0]
        and old_flat[keep][1] == new_flat[keep][1]
    ):
        keep += 1
    # A split group partly kept must be priced again as a whole.
    while keep > 0 and keep < len(new_flat) and new_flat[keep][2] == new_flat[keep - 1][2]:
        keep -= 1
    steps: list[Step] = [
        VoidAward(
            round=state.round, award=award, reason=reasons.get((award.seat, award.hand), "repriced")
        )
        for award in reversed(old[keep:])
    ]
    start = 0
    for group in groups:
        if start >= keep:
            claims = tuple(_claim(params, seat, hand) for seat, hand in group)
            steps.append(
                ReserveAwards(round=state.round, claims=claims, first_order=confirmed + start)
            )
        start += len(group)
    return tuple(steps)


def confirm(params: TableParams, state: TableState, cmd: Confirm) -> Rejected | Plan:
    if error := supervisor_error(state, cmd.supervisor, "CONFIRM"):
        return error
    if error := awaiting_error(state, "CONFIRM"):
        return error
    pending = state.pending
    if not pending:
        return Rejected("no meter award awaits the supervisor", RejectCode.NOTHING_PENDING, state)
    award = pending[0]
    if params.policy is Policy.SPLIT:
        # Approved, paid at RECONCILE: a split share is final only with the round's keyed set.
        approval = AwardApproved(
            at=cmd.at,
            round=state.round,
            seat=award.seat,
            hand=award.hand,
            meter=award.meter,
            units=award.units,
            by=cmd.actor,
        )
        return (approval,)
    return (PostAward(round=state.round, award=award, by=cmd.actor),)


def reject(params: TableParams, state: TableState, cmd: Reject) -> Rejected | Plan:
    if error := supervisor_error(state, cmd.supervisor, "REJECT"):
        return error
    if error := awaiting_error(state, "REJECT"):
        return error
    pending = state.pending
    if not pending:
        return Rejected("no meter award awaits the supervisor", RejectCode.NOTHING_PENDING, state)
    first = (pending[0].seat, pending[0].hand)
    wanted = [(a.seat, a.hand) for a in state.unpaid if (a.seat, a.hand) != first]
    return reprice(params, state, wanted, cmd.at, {first: "rejected"})
