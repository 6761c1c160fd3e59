"""The two-phase award: reserve (price it into ``award_pending``), then post (pay) or void.

Reserving prices a claim -- or a split group of claims of one hand on one meter -- on the
meter as it stands: the percentage truncated to the cent, shared in whole cents with the
indivisible cent to the first; a 100% award resets the meter to seed plus reserve at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import floor

from progressived.core.money import UNITS_PER_CENT, truncate_to_cent
from progressived.core.params import TableParams
from progressived.engine import accounts
from progressived.engine.events import (
    AwardConfirmed,
    AwardKeyed,
    AwardReversed,
    Posting,
    WagerRefunded,
)
from progressived.engine.meter_port import PostAward, RefundContribution, ReserveAwards, VoidAward


def reserve_awards(
    params: TableParams,
    balances: Mapping[str, int],
    request: ReserveAwards,
    at: str,
    round_no: int,
) -> tuple[AwardKeyed, ...]:
    """Price one group of claims on the meter as it stands and reserve each award."""
    group = request.claims
    rule = params.paytable.rule_for(group[0].hand)
    assert rule is not None
    meter_id = rule.pay.meter
    meter_acc = accounts.meter(meter_id)
    whole = truncate_to_cent(floor(balances.get(meter_acc, 0) * rule.pay.percent))
    whole_cents = whole // UNITS_PER_CENT
    count = len(group)
    share, odd = divmod(whole_cents, count)
    events: list[AwardKeyed] = []
    for index, claim in enumerate(group):
        units = (share + (odd if index == 0 else 0)) * UNITS_PER_CENT
        before = balances.get(meter_acc, 0)
        postings = [Posting(meter_acc, -units), Posting(accounts.pending(meter_id), units)]
        reset_reserve = reset_seed = 0
        if rule.pay.percent == 1 and index == count - 1:
            reset_reserve = balances.get(accounts.reserve(meter_id), 0)
            reset_seed = params.reset_seed(meter_id)
            if reset_reserve:
                postings += [
                    Posting(accounts.reserve(meter_id), -reset_reserve),
                    Posting(meter_acc, reset_reserve),
                ]
            postings += [
                Posting(accounts.seed_funding(meter_id), -reset_seed),
                Posting(meter_acc, reset_seed),
            ]
        frozen = tuple(postings)
        balances = accounts.post(balances, frozen)
        events.append(
            AwardKeyed(
                at=at,
                round=round_no,
                seat=claim.seat,
                hand=claim.hand,
                meter=meter_id,
                units=units,
                meter_before=before,
                meter_after=balances.get(meter_acc, 0),
                reset_reserve=reset_reserve,
                reset_seed=reset_seed,
                order=request.first_order + index,
                share_of=count,
                postings=frozen,
            )
        )
    return tuple(events)


def void_award(
    balances: Mapping[str, int], request: VoidAward, at: str, round_no: int
) -> AwardReversed:
    """The exact reverse of a reserved award."""
    award = request.award
    meter_acc = accounts.meter(award.meter)
    postings = accounts.reverse(award.postings)
    return AwardReversed(
        at=at,
        round=round_no,
        seat=award.seat,
        hand=award.hand,
        meter=award.meter,
        units=award.units,
        meter_before=balances.get(meter_acc, 0),
        meter_after=accounts.post(balances, postings).get(meter_acc, 0),
        reason=request.reason,
        postings=postings,
    )


def post_award(request: PostAward, at: str, round_no: int) -> AwardConfirmed:
    """Pay a reserved award: pending -> paid by an attendant."""
    award = request.award
    return AwardConfirmed(
        at=at,
        round=round_no,
        seat=award.seat,
        hand=award.hand,
        meter=award.meter,
        units=award.units,
        by=request.by,
        postings=(
            Posting(accounts.pending(award.meter), -award.units),
            Posting(accounts.paid_attendant(award.meter), award.units),
        ),
    )


def refund(request: RefundContribution, at: str, round_no: int) -> WagerRefunded:
    """VOID: the exact reverse of one seat's recorded contribution."""
    return WagerRefunded(
        at=at,
        round=round_no,
        seat=request.seat,
        units=request.units,
        postings=accounts.reverse(request.receipt),
    )
