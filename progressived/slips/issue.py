"""Deciding the slips of a transaction from its events (pure: no I/O, no clock).

The ledger calls :func:`issue` for every batch of engine events it journals, with the
state before them, and journals what it returns in the same transaction: a
``slip_issued`` row after each confirmed meter award (``award_confirmed``: a 100% or
percentage hit, at a linked table the award the link answered), each fixed pay from the
tray (``tray_paid``) and each envy bonus (``envy_paid``), and a ``slip_voided`` row when an
award whose slip is live is reversed. The serial comes from :class:`Series`, the table's
one series: the next number is always the last one plus one, and the series only moves
when the transaction commits, so the numbers have no gap and none is used twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from progressived.core.params import TableParams
from progressived.core.paytable import PayKind
from progressived.engine.events import (
    AwardConfirmed,
    AwardKeyed,
    AwardReversed,
    EnvyPaid,
    Event,
    Posting,
    TrayPaid,
)
from progressived.engine.state import TableState
from progressived.slips.rules import SlipRules
from progressived.slips.slip import ISSUED, VOIDED, Slip, Source, Void, VoidCause

# The events that issue or void a slip (an AwardKeyed only prices one in the same batch).
_SLIP_KINDS = frozenset({AwardConfirmed.kind, TrayPaid.kind, EnvyPaid.kind, AwardReversed.kind})


def _no_live() -> Mapping[str, tuple[str, int]]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Series:
    """Where the table's series stands: the last number issued, and the live slips of the
    latest round that has slips (an award can only be reversed within its round), by award."""

    last: int = 0
    round: int = 0
    live: Mapping[str, tuple[str, int]] = field(default_factory=_no_live)


@dataclass(frozen=True, slots=True)
class Entry:
    """One row to journal: ``kind`` (``slip_issued`` / ``slip_voided``), its data, who."""

    kind: str
    data: dict[str, object]
    actor: str
    round: int
    seat: int


@dataclass(frozen=True, slots=True)
class _Priced:
    units: int
    meter_before: int
    meter_after: int
    share_of: int


def meter_award_id(round_: int, seat: int, hand: str) -> str:
    return f"{round_}:{seat}:{hand}"


def envy_award_id(round_: int, seat: int, from_seat: int, hand: str) -> str:
    return f"{round_}:{seat}:envy:{from_seat}:{hand}"


def issue(
    rules: SlipRules,
    params: TableParams,
    state: TableState,
    events: Sequence[Event],
    actor: str,
    series: Series,
) -> tuple[list[Entry], Series]:
    """The slip rows for ``events`` (journaled from ``state``, by ``actor``) and the series
    after them. Events that pay nothing give nothing."""
    if not any(e.kind in _SLIP_KINDS for e in events):  # most batches: sensors, LOCK, keys
        return [], series
    priced = {
        (a.seat, a.hand, a.meter): _from_award(
            a.meter, a.units, a.meter_before, a.postings, a.share_of
        )
        for a in state.awards
    }
    out: list[Entry] = []
    for event in events:
        if isinstance(event, AwardKeyed):
            priced[(event.seat, event.hand, event.meter)] = _Priced(
                event.units, event.meter_before, event.meter_after, event.share_of
            )
            continue
        if isinstance(event, AwardReversed):
            award = meter_award_id(event.round, event.seat, event.hand)
            entry, series = _void_on_reversal(series, award, event)
            out.extend(entry)
            continue
        slip = _slip(rules, params, event, priced, actor, series.last + 1)
        if slip is None:
            continue
        live = dict(series.live) if series.round == slip.round else {}
        live[slip.award] = (slip.serial, slip.number)
        series = Series(slip.number, slip.round, MappingProxyType(live))
        out.append(Entry(ISSUED, slip.to_dict(), slip.preparer, slip.round, slip.seat))
    return out, series


def reissued(rules: SlipRules, slip: Slip, series: Series, by: str) -> tuple[Slip, Series]:
    """``slip`` again under the series' next serial (its spoiled original was voided)."""
    number = series.last + 1
    again = replace(
        slip,
        serial=rules.serial(number),
        number=number,
        reissue_of=slip.serial,
        preparer=by,
        copies=rules.copies,
    )
    live = dict(series.live)
    if series.round == slip.round:  # an award of the latest round: its live slip is known
        live[slip.award] = (again.serial, again.number)
    return again, Series(again.number, series.round, MappingProxyType(live))


def _from_award(
    meter: str, units: int, before: int, postings: Iterable[Posting], share_of: int
) -> _Priced:
    """An award keyed before this transaction: the meter after it is the meter before plus
    its postings to the meter (the award's amount out, a 100% award's reset in)."""
    account = f"meter:{meter}"
    moved = sum(p.units for p in postings if p.account == account)
    return _Priced(units, before, before + moved, share_of)


def _void_on_reversal(
    series: Series, award: str, event: AwardReversed
) -> tuple[list[Entry], Series]:
    if series.round != event.round or award not in series.live:
        return [], series
    serial, number = series.live[award]
    void = Void(
        serial=serial,
        number=number,
        award=award,
        cause=VoidCause.AWARD_REVERSED,
        reason=f"award reversed: {event.reason}",
        by="system",
    )
    live = {k: v for k, v in series.live.items() if k != award}
    entry = Entry(VOIDED, void.to_dict(), "system", event.round, event.seat)
    return [entry], Series(series.last, series.round, MappingProxyType(live))


def _slip(
    rules: SlipRules,
    params: TableParams,
    event: Event,
    priced: Mapping[tuple[int, str, str], _Priced],
    actor: str,
    number: int,
) -> Slip | None:
    """The slip ``event`` pays, numbered ``number``, or None when it pays none."""
    wager = params.wager_units
    rule = params.paytable.rule_for(getattr(event, "hand", ""))
    hand_name = rule.name if rule is not None else str(getattr(event, "hand", ""))
    common: dict[str, Any] = {
        "serial": rules.serial(number),
        "number": number,
        "property": rules.property_name,
        "table_id": params.table_id,
        "table": rules.table_name or params.table_id,
        "asset": rules.asset,
        "location": rules.location,
        "game": params.paytable.title,
        "paytable": params.paytable.id,
        "round": event.round,
        "seat": event.seat,
        "hand_name": hand_name,
        "wager_units": wager,
        "payment": rules.payment,
    }
    if isinstance(event, AwardConfirmed):
        award = priced.get((event.seat, event.hand, event.meter))
        percent = rule.pay.percent if rule is not None else Fraction(0)
        share = award.share_of if award is not None else 1
        pay = rule.pay.describe() if rule is not None else "meter award"
        if share > 1:
            pay += f", one of {share} equal shares"
        meter = params.meter(event.meter) if event.meter in params.meter_ids else None
        return _finish(
            rules,
            common,
            award=meter_award_id(event.round, event.seat, event.hand),
            source=Source.METER,
            hand=event.hand,
            from_seat=0,
            meter=event.meter,
            link=meter.link if meter is not None else None,
            before=award.meter_before if award is not None else None,
            after=award.meter_after if award is not None else None,
            units=event.units,
            pay=pay,
            percent=f"{percent.numerator}/{percent.denominator}",
            share_of=share,
            winnings=event.units,
            preparer=event.by or actor,
        )
    if isinstance(event, TrayPaid):
        returned = wager if rule is not None and rule.pay.kind is PayKind.TO_ONE else 0
        return _finish(
            rules,
            common,
            award=meter_award_id(event.round, event.seat, event.hand),
            source=Source.TRAY,
            hand=event.hand,
            from_seat=0,
            meter=None,
            link=None,
            before=None,
            after=None,
            units=event.units,
            pay=rule.pay.describe() if rule is not None else "fixed pay",
            percent=None,
            share_of=1,
            winnings=max(event.units - returned, 0),
            preparer=actor,
        )
    if isinstance(event, EnvyPaid):
        return _finish(
            rules,
            common,
            award=envy_award_id(event.round, event.seat, event.from_seat, event.hand),
            source=Source.ENVY,
            hand=event.hand,
            from_seat=event.from_seat,
            meter=None,
            link=None,
            before=None,
            after=None,
            units=event.units,
            pay=f"envy bonus for {hand_name} at seat {event.from_seat}",
            percent=None,
            share_of=1,
            winnings=event.units,
            preparer=actor,
        )
    return None


def _finish(
    rules: SlipRules,
    common: dict[str, Any],
    *,
    award: str,
    source: Source,
    hand: str,
    from_seat: int,
    meter: str | None,
    link: str | None,
    before: int | None,
    after: int | None,
    units: int,
    pay: str,
    percent: str | None,
    share_of: int,
    winnings: int,
    preparer: str,
) -> Slip:
    taxable = rules.taxable(winnings, common["wager_units"])
    return Slip(
        **common,
        award=award,
        source=source,
        hand=hand,
        from_seat=from_seat,
        meter=meter,
        link=link,
        meter_before_units=before,
        meter_after_units=after,
        units=units,
        pay=pay,
        percent=percent,
        share_of=share_of,
        winnings_units=winnings,
        preparer=preparer,
        taxable=taxable,
        notation=rules.taxable_text if taxable else rules.non_taxable_text,
        signatures=rules.signatures_for(units),
        notices=rules.notices_for(units),
        copies=rules.copies,
    )
