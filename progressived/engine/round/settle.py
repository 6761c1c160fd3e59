"""Closing a round: RECONCILE (settle: approved awards, tray pays, envy) and VOID (misdeal)."""

from __future__ import annotations

from progressived.core.params import TableParams
from progressived.core.paytable import HandRule, scale_amount
from progressived.engine import accounts
from progressived.engine.commands import Reconcile, Void
from progressived.engine.decision import RejectCode, Rejected
from progressived.engine.events import (
    EnvyPaid,
    Payment,
    Posting,
    RoundReconciled,
    RoundVoided,
    TrayPaid,
)
from progressived.engine.meter_port import PostAward, RefundContribution
from progressived.engine.round.keying import reprice
from progressived.engine.round.plan import Plan, Step, awaiting_error, supervisor_error
from progressived.engine.state import Phase, TableState


def _envy_units(params: TableParams, rule: HandRule) -> int:
    return scale_amount(rule.envy, params.wager_units, params.paytable.wager)


def _pay_approved(state: TableState) -> list[Step]:
    """Split policy: the approved awards, now final, posted (paid by an attendant)."""
    by = {(seat, hand): who for seat, hand, who in state.approved}
    return [
        PostAward(round=state.round, award=award, by=by[(award.seat, award.hand)])
        for award in state.awards
        if (award.seat, award.hand) in by
    ]


def reconcile(params: TableParams, state: TableState, cmd: Reconcile) -> Rejected | Plan:
    if state.phase is not Phase.LOCKED:
        return Rejected("no locked round to reconcile", RejectCode.NOT_LOCKED, state)
    if pending := state.pending:
        return Rejected(
            f"the {pending[0].hand} award at seat {pending[0].seat} awaits the supervisor",
            RejectCode.AWARD_PENDING,
            state,
        )
    if error := awaiting_error(state, "RECONCILE"):
        return error
    order = params.seat_order()
    settlement: list[Payment] = []
    steps: list[Step] = _pay_approved(state)
    for seat in order:
        for award in state.awards:
            if award.seat == seat:
                settlement.append(Payment(seat, award.hand, "meter", award.units))
        for keyed in state.keyed:
            if keyed.seat == seat and keyed.source == "tray":
                settlement.append(Payment(seat, keyed.hand, "tray", keyed.units))
                steps.append(
                    TrayPaid(
                        at=cmd.at,
                        round=state.round,
                        seat=seat,
                        hand=keyed.hand,
                        units=keyed.units,
                        postings=(
                            Posting(accounts.TRAY, -keyed.units),
                            Posting(accounts.PAID_TRAY, keyed.units),
                        ),
                    )
                )
    triggers = sorted(
        [(k.seat, k.hand) for k in state.keyed] + [(a.seat, a.hand) for a in state.awards],
        key=lambda sh: params.order_key(sh[0]),
    )
    for seat in order:
        if seat not in state.locked:
            continue
        for trigger_seat, hand in triggers:
            rule = params.paytable.rule_for(hand)
            assert rule is not None
            if not rule.envy or trigger_seat in state.player_of(seat):
                continue
            units = _envy_units(params, rule)
            settlement.append(Payment(seat, hand, "envy", units, trigger_seat))
            steps.append(
                EnvyPaid(
                    at=cmd.at,
                    round=state.round,
                    seat=seat,
                    hand=hand,
                    from_seat=trigger_seat,
                    units=units,
                    postings=(
                        Posting(accounts.TRAY, -units),
                        Posting(accounts.PAID_ENVY, units),
                    ),
                )
            )
    steps.append(
        RoundReconciled(
            at=cmd.at,
            round=state.round,
            settlement=tuple(settlement),
            seats=tuple(sorted(state.locked)),
        )
    )
    return tuple(steps)


def void(params: TableParams, state: TableState, cmd: Void) -> Rejected | Plan:
    if error := supervisor_error(state, cmd.supervisor, "VOID"):
        return error
    if state.phase is not Phase.LOCKED:
        return Rejected("no locked round to void", RejectCode.NOT_LOCKED, state)
    if any(a.confirmed for a in state.awards):
        return Rejected(
            "a meter award was confirmed and paid this round; a void cannot reverse it "
            "(use a recorded meter adjustment)",
            RejectCode.AWARD_CONFIRMED,
            state,
        )
    if error := awaiting_error(state, "VOID"):
        return error
    reasons = {(a.seat, a.hand): "voided" for a in state.pending}
    steps: list[Step] = list(reprice(params, state, [], cmd.at, reasons))
    steps += [
        RefundContribution(round=state.round, seat=seat, units=params.wager_units, receipt=postings)
        for seat, postings in reversed(state.wager_postings)
    ]
    steps.append(RoundVoided(at=cmd.at, round=state.round, by=cmd.actor))
    return tuple(steps)
