"""The paytable as the sign shows it: each hand's name and today's amounts (docs/sign.md).

A percentage pay is shown in dollars at the meter the sign shows, priced exactly as the
engine prices an award (docs/engine.md): the percentage of the meter's units, floored to the
unit, truncated to the cent. A table's meter message carries whole cents, so its pay is the
percentage of those cents (the meter's sub-cent part, which the sign never sees, can make the
award one cent more); a link's own meter carries its units and is priced exactly. Fixed pays
and envy amounts scale with the configured wager as the engine scales them. Integers and
fractions only: never a float.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from math import floor
from typing import Any

from progressived.core.money import UNITS_PER_CENT, display_cents, truncate_to_cent
from progressived.core.paytable import HAND_NAMES, Hand, HandRule, PayKind, scale_amount
from progressived.signs.web.look import SourceLook


@dataclass(frozen=True)
class PayRow:
    """One line of the paytable on the sign."""

    hand: str  # the name players read
    pays: str  # "$1,234.56" (a meter pay at today's meter), "$70", or "10%" with no meter
    share: str  # "100%" / "10%" for a meter pay, "" for a fixed one
    envy: str  # "$100" or ""
    meter: str  # the meter a percentage pay draws on ("" for a fixed pay)


def money(cents: int, whole: bool = False) -> str:
    """``$1,234.56``; with ``whole``, an amount of whole dollars drops its ``.00`` ($2,500)."""
    if whole and cents % 100 == 0:
        return display_cents(cents)[:-3]  # "$2,500.00" -> "$2,500"
    return display_cents(cents)


def _percent(share: Fraction) -> str:
    pct = share * 100
    if pct.denominator == 1:
        return f"{pct.numerator}%"
    return f"{(Decimal(pct.numerator) / pct.denominator).normalize():f}%"  # 2.5%


def meter_units(meter: Mapping[str, Any]) -> int:
    """The meter's units as the sign knows them: a link's exact units, else its cents."""
    units = meter.get("units")
    if isinstance(units, int) and not isinstance(units, bool):
        return units
    return int(meter["cents"]) * UNITS_PER_CENT


def meter_pay_cents(units: int, share: Fraction) -> int:
    """An award of ``share`` of a meter of ``units``, as the engine prices it, in cents."""
    return truncate_to_cent(floor(units * share)) // UNITS_PER_CENT


def drawn_meter(rule: HandRule, meters: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The meter a percentage pay draws on: the one it names, else a source's only meter
    (a link's meter keeps its own id while its paytable says ``main``)."""
    for meter in meters:
        if meter["meter"] == rule.pay.meter:
            return meter
    return meters[0] if len(meters) == 1 else None


def pay_rows(look: SourceLook, meters: Sequence[Mapping[str, Any]]) -> list[PayRow]:
    """Every hand of the source's paytable, with its amount at today's meter."""
    table = look.paytable
    if table is None:
        return []
    wager = look.wager if look.wager is not None else table.wager
    rows = []
    for rule in table.hands:
        pay, share, meter_id = rule.pay, "", ""
        if pay.kind is PayKind.PERCENT_OF_METER:
            share = _percent(pay.percent)
            drawn = drawn_meter(rule, meters)
            if drawn is not None and drawn.get("state") != "waiting":
                meter_id = str(drawn["meter"])
                pays = money(meter_pay_cents(meter_units(drawn), pay.percent))
            else:
                pays = share
        else:
            # What the hand wins ("X for 1" and "X to 1" alike: X times the wager).
            units = (
                scale_amount(pay.amount, wager, table.wager)
                if pay.kind is PayKind.FIXED
                else pay.multiple * wager
            )
            pays = money(units // UNITS_PER_CENT, whole=True)
        envy = ""
        if rule.envy:
            envy = money(scale_amount(rule.envy, wager, table.wager) // UNITS_PER_CENT, whole=True)
        rows.append(PayRow(rule.name, pays, share, envy, meter_id))
    return rows


def hand_name(look: SourceLook, hand: str) -> str:
    """A hand id as players read it: the paytable's name, the built-in one, or (a hand
    this release does not know) the id as it came, so nothing is hidden."""
    if look.paytable is not None:
        rule = look.paytable.rule_for(hand)
        if rule is not None:
            return rule.name
    try:
        return HAND_NAMES[Hand(hand)]
    except ValueError:
        return hand


def level_name(look: SourceLook, meter: str, index: int, count: int) -> str:
    """A meter (a level) as players read it: the sign file's name for it, else the hand
    that wins all of it ("AKQ Spades Jackpot"), else "Progressive Jackpot"."""
    if meter in look.levels:
        return look.levels[meter]
    table = look.paytable
    if table is not None:
        metered = [
            r for r in table.hands if r.pay.kind is PayKind.PERCENT_OF_METER and r.pay.percent == 1
        ]
        for rule in metered:
            if rule.pay.meter == meter or (count == 1 and len(metered) == 1):
                return f"{rule.name} Jackpot"
    return "Progressive Jackpot" if count == 1 else f"Jackpot {index + 1}"
