"""The PAR sheet's expectation beside what happened: contributions and hit frequency.

Expected contribution: each wager feeds the meter and its reserve at their recorded rates
(``rate`` + ``reserve_rate``), so a period's wagers should have contributed wagers x wager x
(rate + reserve rate); the actual figure differs only by what the engine truncated to the
unit, what a limit sent to overflow... or by a rate that is not the approved one. Expected
hits: each wager holds hand h with the PAR sheet's exact probability P(h)
(progressived/par, docs/par.md), so N wagers expect N x P(h) hits of each hand the meter
pays. The rates and paytable are the ones the ledger records in force at the period's
start; a change within the period is listed beside.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

from progressived.config.paytables import PaytableError, find_paytable
from progressived.par.sheet import ParInputs, build_sheet


@dataclass(frozen=True, slots=True)
class HandExpectation:
    hand: str
    probability: Fraction  # per wager
    expected_hits: Fraction
    actual_hits: int


@dataclass(frozen=True, slots=True)
class Expectation:
    paytable: str | None
    rate: Fraction
    reserve_rate: Fraction
    wagered_units: int
    expected_contribution: Fraction  # units
    hands: tuple[HandExpectation, ...]
    note: str = ""


@cache
def _probabilities(paytable_id: str, folder: Path | None) -> tuple[tuple[str, str, Fraction], ...]:
    """(hand, meter, P(hand)) of every hand the paytable pays from a meter (once a process)."""
    paytable = find_paytable(paytable_id, folder)
    sheet = build_sheet(paytable, ParInputs())
    meter_of = {rule.hand: rule.pay.meter for rule in paytable.hands if rule.pay.from_meter}
    return tuple(
        (line.hand.value, meter_of[line.hand], line.probability)
        for line in sheet.lines
        if line.hand in meter_of
    )


def _fraction(value: Any) -> Fraction:
    try:
        return Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        return Fraction(0)


def expectation(
    *,
    params: dict[str, Any],
    meter: str,
    paytable: str | None,
    paytable_meter: str,
    wagers: int,
    wagered_units: int,
    hits: dict[str, int],
    folder: Path | None,
) -> Expectation:
    """The expectation for ``meter`` (``paytable_meter``: the meter's id in the paytable's
    pays, which differs from a link's id for it)."""
    rate = _fraction(params.get(f"meters.{meter}.rate", 0))
    reserve_rate = _fraction(params.get(f"meters.{meter}.reserve_rate", 0))
    expected = Fraction(wagered_units) * (rate + reserve_rate)
    note = ""
    hands: list[HandExpectation] = []
    if paytable is None:
        note = "no paytable known for this meter (give a member table's ledger)"
    else:
        try:
            for hand, pays_from, p in _probabilities(paytable, folder):
                if pays_from == paytable_meter:
                    hands.append(HandExpectation(hand, p, wagers * p, hits.get(hand, 0)))
        except PaytableError as exc:
            note = f"PAR sheet not available: {exc}"
    for hand, count in sorted(hits.items()):
        if all(h.hand != hand for h in hands):
            hands.append(HandExpectation(hand, Fraction(0), Fraction(0), count))
    return Expectation(paytable, rate, reserve_rate, wagered_units, expected, tuple(hands), note)
