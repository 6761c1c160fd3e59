"""The local adapter of the meter port: the meter book decided in the table's own process.

Its answers are immediate and its events go into the same ledger transaction as the
round's, so a single table behaves (and its figures come out) exactly as one engine would.
"""

from __future__ import annotations

from progressived.core.params import TableParams
from progressived.engine.events import Event, WagerLocked
from progressived.engine.meter_port import (
    Contribute,
    MeterRequest,
    PostAward,
    RefundContribution,
    ReserveAwards,
    VoidAward,
)
from progressived.engine.meterbook.contributions import contribution
from progressived.engine.meterbook.pricing import post_award, refund, reserve_awards, void_award
from progressived.engine.state import TableState


class LocalMeterBook:
    """Answers every meter request at once from the balances in the table's state."""

    def answer(
        self, params: TableParams, state: TableState, request: MeterRequest, at: str
    ) -> tuple[Event, ...]:
        round_no = request.round
        match request:
            case Contribute(seat=seat, units=units, count=count):
                postings = contribution(params, state.balances, count)
                return (
                    WagerLocked(at=at, round=round_no, seat=seat, units=units, postings=postings),
                )
            case ReserveAwards():
                return reserve_awards(params, state.balances, request, at, round_no)
            case VoidAward():
                return (void_award(state.balances, request, at, round_no),)
            case PostAward():
                return (post_award(request, at, round_no),)
            case RefundContribution():
                return (refund(request, at, round_no),)


LOCAL_BOOK = LocalMeterBook()
