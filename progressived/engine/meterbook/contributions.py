"""Money into the meters: opening (seed funding), each wager's contribution, linked wagers."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from math import floor
from numbers import Rational

from progressived.core.params import AboveLimit, TableParams
from progressived.engine import accounts
from progressived.engine.decision import RejectCode
from progressived.engine.events import Event, LinkedContribution, MeterOpened, Posting, Postings


def open_meter_events(
    params: TableParams, opened: frozenset[str], round_no: int, at: str
) -> list[Event]:
    """Fund every configured meter not in ``opened`` with its starting amount (seed funding)."""
    events: list[Event] = []
    for meter in params.meters:
        if meter.id in opened or meter.link is not None:  # a linked meter's money is the link's
            continue
        units = params.start_units(meter)
        events.append(
            MeterOpened(
                at=at,
                round=round_no,
                meter=meter.id,
                units=units,
                postings=(
                    Posting(accounts.seed_funding(meter.id), -units),
                    Posting(accounts.meter(meter.id), units),
                ),
            )
        )
    return events


def contribution(
    params: TableParams, balances: Mapping[str, int], count: int = 1, source: str = accounts.WAGERS
) -> Postings:
    """The postings for ``count`` wagers: each meter's and reserve's share, the rest retained.

    Above a meter's limit the meter's share goes to the reserve or the overflow account.
    Shares are floored to the unit; what flooring leaves is retained by the house, so
    nothing is created or lost.
    """
    key = (id(params), count, source)
    cached = _UNLIMITED.get(key)
    if cached is not None and cached[0] is params:
        return cached[1]
    postings = _contribution(params, balances, count, source)
    if all(meter.limit is None for meter in params.meters):
        # Without a limit the postings do not depend on the balances: keep them for the
        # next wagers of this count (the link's stream repeats one count). The entry holds
        # ``params`` itself, so its id cannot be reused by other parameters while cached.
        if len(_UNLIMITED) >= _UNLIMITED_SIZE:
            _UNLIMITED.clear()
        _UNLIMITED[key] = (params, postings)
    return postings


# Contributions under parameters whose meters have no limit: (id(params), count, source)
# -> (params, postings). Postings are immutable, so one tuple serves every such wager.
_UNLIMITED: dict[tuple[int, int, str], tuple[TableParams, Postings]] = {}
_UNLIMITED_SIZE = 256


def _contribution(
    params: TableParams, balances: Mapping[str, int], count: int, source: str
) -> Postings:
    wager = params.wager_units * count
    postings = [Posting(source, -wager)]
    retained = wager
    for meter in params.meters:
        if meter.link is not None:
            continue  # the link applies its own rates to the wagers' full units
        to_meter = _share(wager, meter.rate)
        to_reserve = _share(wager, meter.reserve_rate)
        retained -= to_meter + to_reserve
        excess = 0
        if meter.limit is not None:
            room = max(0, meter.limit - balances.get(accounts.meter(meter.id), 0))
            excess = max(0, to_meter - room)
            to_meter -= excess
        if to_meter:
            postings.append(Posting(accounts.meter(meter.id), to_meter))
        if meter.above_limit is AboveLimit.RESERVE:
            to_reserve += excess
        elif excess:
            postings.append(Posting(accounts.overflow(meter.id), excess))
        if to_reserve:
            postings.append(Posting(accounts.reserve(meter.id), to_reserve))
    if retained:
        postings.append(Posting(accounts.HOUSE_RETAINED, retained))
    return tuple(postings)


def _share(wager: int, rate: Fraction) -> int:
    """``floor(wager * rate)``, in integers: the same exact result as the ``Fraction``
    product without building one (a ``Fraction``'s denominator is positive, so ``//``
    floors as ``floor`` does). Each contribution computes two per meter: the hot path."""
    if isinstance(rate, Rational):
        return wager * rate.numerator // rate.denominator
    return floor(wager * rate)  # not a rational (a float from a caller): as before


def linked(
    params: TableParams,
    balances: Mapping[str, int],
    round_no: int,
    at: str,
    source_table: str,
    count: int,
    contribution_id: str,
) -> tuple[str, RejectCode] | LinkedContribution:
    """Wagers locked at a linked table: the event, or (reason, code) when they do not fit."""
    if not source_table or source_table == params.table_id:
        return ("a linked contribution needs another table's id", RejectCode.BAD_SOURCE)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 1000:
        return (f"bad wager count {count!r} (1-1000)", RejectCode.BAD_COUNT)
    return LinkedContribution(
        at=at,
        round=round_no,
        source_table=source_table,
        count=count,
        units=params.wager_units * count,
        contribution_id=contribution_id,
        postings=contribution(params, balances, count, accounts.LINKED_WAGERS),
    )
