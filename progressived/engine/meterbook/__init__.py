"""The meter book: one aggregate holding the meters' money.

Meters, reserves, overflow, contributions, award pricing under both policies (split groups
included), the reset after a 100% award, reversal, documented adjustments and transfers,
and opening meters. Pure: requests and commands in, events (with their postings) out.

* :mod:`.contributions` -- what a wager contributes, opening meters, linked wagers.
* :mod:`.pricing` -- reserving (pricing) an award, posting it, voiding it.
* :mod:`.operator` -- documented adjustments and transfers (two-person control).
* :mod:`.local` -- the local adapter of the meter port (same process, same transaction).
"""

from progressived.engine.meterbook.contributions import contribution, linked, open_meter_events
from progressived.engine.meterbook.local import LOCAL_BOOK, LocalMeterBook
from progressived.engine.meterbook.operator import RoundView, adjust, transfer
from progressived.engine.meterbook.pricing import post_award, reserve_awards, void_award

__all__ = [
    "LOCAL_BOOK",
    "LocalMeterBook",
    "RoundView",
    "adjust",
    "contribution",
    "linked",
    "open_meter_events",
    "post_award",
    "reserve_awards",
    "transfer",
    "void_award",
]
