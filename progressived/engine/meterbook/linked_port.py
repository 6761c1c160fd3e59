"""The linked adapter of the meter port: local meters at once, linked meters later.

A table that joins a link (docs/link.md) keeps its local meters in its own book and ledger;
the linked meters' money is the link's. This port answers every request on a local meter
with the local book (same transaction, as a single table does) and, for a linked meter:

* ``Contribute``: at once, with the local postings only (a linked meter takes no share at
  the table; the contribution message carries the wagers' full units to the link);
* ``ReserveAwards`` (a claim) and ``PostAward`` (CONFIRM): later (``None``) -- the round
  waits (PENDING) until the link's result comes back as a ``MeterAnswered``;
* ``VoidAward`` (REJECT, a second press, a reprice): at once, with an ``AwardReversed``
  without postings (the claim_reject goes to the link through the outbox);
* ``RefundContribution`` (VOID): at once, the local receipt (a reversal goes to the link).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from progressived.core.params import TableParams
from progressived.engine.events import AwardReversed, Event
from progressived.engine.meter_port import (
    MeterRequest,
    PostAward,
    ReserveAwards,
    VoidAward,
)
from progressived.engine.meterbook.local import LOCAL_BOOK
from progressived.engine.state import TableState


class LinkedMeterPort:
    """The meter port of a table with linked meters (``params.linked_meters``)."""

    def answer(
        self, params: TableParams, state: TableState, request: MeterRequest, at: str
    ) -> tuple[Event, ...] | None:
        linked = params.linked_meters
        match request:
            case ReserveAwards(claims=claims) if any(c.meter in linked for c in claims):
                return None
            case PostAward(award=award) if award.meter in linked:
                return None
            case VoidAward(award=award) if award.meter in linked:
                return (
                    AwardReversed(
                        at=at,
                        round=request.round,
                        seat=award.seat,
                        hand=award.hand,
                        meter=award.meter,
                        units=award.units,
                        meter_before=award.meter_before,
                        meter_after=award.meter_before,
                        reason=request.reason,
                    ),
                )
        return LOCAL_BOOK.answer(params, state, request, at)


LINKED_PORT = LinkedMeterPort()
