"""The PAR sheet of one paytable: hand probabilities, return, break-even meter, envy, hold.

Everything is an exact :class:`~fractions.Fraction`; money is in units (see
:mod:`progressived.core.money`). Decimal strings are made only for display, with
:mod:`decimal` at a fixed precision. The definitions (what "return" counts, how the
long-run hold treats the seed) are in ``docs/par.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from functools import cache
from typing import Any

from progressived.config.paytables import Cards, Hand, Paytable
from progressived.core.money import UNITS_PER_CENT
from progressived.core.params import DEFAULT_SEED
from progressived.par import five_card, holdem, three_card
from progressived.par.outcomes import OutcomeClass, hand_probabilities, readings


@cache
def classes_for(cards: Cards) -> tuple[OutcomeClass, ...]:
    """The disjoint outcome classes of one reading of the player's cards (once per process).

    Chosen by the paytable's ``cards`` setting, not by its game: the same hold'em hand
    names have very different odds on the first five cards and on the best five of seven.
    """
    if cards is Cards.THREE_CARD:
        return three_card.outcome_classes()
    if cards is Cards.FIRST_FIVE:
        return five_card.outcome_classes()
    return holdem.outcome_classes()


_CARDS_READINGS = {
    Cards.THREE_CARD: "hands are the player's three cards (cards = three-card)",
    Cards.FIRST_FIVE: (
        "hands are the five-card hand of the player's two hole cards and the three flop cards;"
        " the turn and river do not count (cards = first-five)"
    ),
    Cards.BEST_OF_SEVEN: (
        "hands are the best five of the player's seven cards, the two hole cards and the five"
        " community cards (cards = best-of-seven)"
    ),
}


@dataclass(frozen=True, slots=True)
class ParInputs:
    """What the sheet is asked for. Amounts in units; ``None`` rates: no long-run section."""

    meter: int | None = None  # None: the seed
    envy_players: int = 0  # other bettors at the table
    non_bettors: int = 0  # other players without the side bet (count only if allowed)
    meter_rate: Fraction | None = None
    reserve_rate: Fraction | None = None
    seed: int = DEFAULT_SEED

    @property
    def meter_units(self) -> int:
        return self.seed if self.meter is None else self.meter


@dataclass(frozen=True, slots=True)
class HandLine:
    """One paytable row with its probability and its share of the return."""

    hand: Hand
    pays: str
    probability: Fraction
    meter_percent: Fraction  # of the meter; 0 for a tray pay
    tray_pay: int  # units from the tray; 0 for a meter pay
    envy: int  # units paid to each other bettor
    pay_at_meter: Fraction  # units this hand pays at the sheet's meter
    return_share: Fraction  # P(hand) x pay / wager


@dataclass(frozen=True, slots=True)
class LongRun:
    """Steady-state figures under the contribution model of docs/par.md."""

    meter_rate: Fraction
    reserve_rate: Fraction
    seed: int
    reset_probability: Fraction  # P(a 100% meter pay) per wager
    player_return: Fraction  # per unit wagered, envy excluded
    hold: Fraction  # 1 - player_return
    hold_with_envy: Fraction
    average_meter_at_hit: Fraction | None  # units; None when nothing pays off the meter


@dataclass(frozen=True, slots=True)
class ParSheet:
    paytable: Paytable
    inputs: ParInputs
    lines: tuple[HandLine, ...]
    readings: tuple[str, ...]
    tray_return: Fraction  # per unit wagered from fixed pays
    meter_coefficient: Fraction  # sum P(h) x percent(h): meter units paid per round per unit meter
    player_return: Fraction  # per unit wagered at the meter, own hand only
    break_even_meter: Fraction | None  # units
    envy_triggers: int  # other players whose hands can pay this bettor envy
    envy_per_round: Fraction  # units
    long_run: LongRun | None

    @property
    def warnings(self) -> tuple[str, ...]:
        """Figures a reader must not miss: a return above 100% before any meter pay."""
        out = []
        if self.tray_return >= 1:
            out.append(
                f"the fixed pays alone return {decimal_text(self.tray_return * 100, 4)}% of the "
                "wager, at least 100% at any meter: check the paytable's pays and the reading "
                "of its hands"
            )
        return tuple(out)

    @property
    def wager(self) -> int:
        return self.paytable.wager

    @property
    def return_with_envy(self) -> Fraction:
        return self.player_return + self.envy_per_round / self.wager


class ParError(ValueError):
    """Inputs a PAR sheet cannot be built from."""


def average_meter_at_hit(
    reset_probability: Fraction, meter_coefficient: Fraction, contribution: Fraction, seed: int
) -> Fraction | None:
    """Long-run average meter when a meter pay is made (units); None if none ever is.

    Per wager the meter (with the reserve, which flows back into it at a reset) gains
    ``contribution`` and the house adds ``seed`` with probability ``reset_probability``;
    it pays ``meter_coefficient`` x the meter on average, the hand being independent of the
    meter. Balancing what flows in against what is paid out gives the average meter at the
    moment of a pay, which is also the average at a 100% hit (docs/par.md).
    """
    if meter_coefficient == 0:
        return None
    return (contribution + reset_probability * seed) / meter_coefficient


def return_at(sheet: ParSheet, meter: Fraction) -> Fraction:
    """The return per unit wagered at another meter (own hand only)."""
    return sheet.tray_return + sheet.meter_coefficient * meter / sheet.wager


def _meter_readings(paytable: Paytable) -> list[str]:
    if len(paytable.meters) > 1:
        names = ", ".join(sorted(paytable.meters))
        return [f"percentages of every meter ({names}) are taken of the one --meter amount"]
    return []


def _check(inputs: ParInputs) -> None:
    """Refuse inputs no table has."""
    if inputs.meter_units < 0:
        raise ParError("the meter must not be negative")
    if inputs.envy_players < 0 or inputs.non_bettors < 0:
        raise ParError("player counts must not be negative")
    if inputs.envy_players + inputs.non_bettors > 11:
        raise ParError("a table has at most 12 seats: at most 11 other players")
    if inputs.seed <= 0:
        raise ParError("the seed must be positive")


def _hand_lines(
    paytable: Paytable, probs: Mapping[Hand, Fraction], meter: Fraction
) -> list[HandLine]:
    """One line per hand of the paytable: its probability, its pay at ``meter``, its return."""
    wager = paytable.wager
    lines = []
    for rule in paytable.hands:
        p = probs[rule.hand]
        if rule.pay.from_meter:
            percent, tray = rule.pay.percent, 0
            pay = percent * meter
        else:
            percent, tray = Fraction(0), rule.pay.tray_amount(wager, wager)
            pay = Fraction(tray)
        lines.append(
            HandLine(
                rule.hand, rule.pay.describe(), p, percent, tray, rule.envy, pay, p * pay / wager
            )
        )
    return lines


def _long_run(
    inputs: ParInputs,
    lines: Sequence[HandLine],
    tray_return: Fraction,
    coefficient: Fraction,
    envy_per_wager: Fraction,
    wager: int,
) -> LongRun | None:
    """The long-run return and hold at the given meter and reserve rates (None: no rates)."""
    if inputs.meter_rate is None and inputs.reserve_rate is None:
        return None
    r = inputs.meter_rate or Fraction(0)
    q = inputs.reserve_rate or Fraction(0)
    if r < 0 or q < 0 or r + q > 1:
        raise ParError("rates must be non-negative and together at most 1")
    reset = sum((ln.probability for ln in lines if ln.meter_percent == 1), Fraction(0))
    long_return = tray_return + r + q + reset * inputs.seed / wager
    average = average_meter_at_hit(reset, coefficient, (r + q) * wager, inputs.seed)
    return LongRun(
        meter_rate=r,
        reserve_rate=q,
        seed=inputs.seed,
        reset_probability=reset,
        player_return=long_return,
        hold=1 - long_return,
        hold_with_envy=1 - long_return - envy_per_wager,
        average_meter_at_hit=average,
    )


def build_sheet(paytable: Paytable, inputs: ParInputs) -> ParSheet:
    """Compute the sheet. Raises :class:`ParError` for impossible inputs."""
    _check(inputs)
    wager = paytable.wager
    meter = Fraction(inputs.meter_units)
    classes = classes_for(paytable.cards)
    probs = hand_probabilities(classes, paytable)
    lines = _hand_lines(paytable, probs, meter)
    tray_return = sum((ln.probability * ln.tray_pay for ln in lines), Fraction(0)) / wager
    coefficient = sum((ln.probability * ln.meter_percent for ln in lines), Fraction(0))
    player_return = tray_return + coefficient * meter / wager
    break_even = (
        None if coefficient == 0 else max(Fraction(0), (1 - tray_return) * wager / coefficient)
    )
    triggers = inputs.envy_players + (
        0 if paytable.envy_requires_trigger_wager else inputs.non_bettors
    )
    envy_each = sum((ln.probability * ln.envy for ln in lines), Fraction(0))
    envy = triggers * envy_each
    long_run = _long_run(inputs, lines, tray_return, coefficient, envy / wager, wager)
    return ParSheet(
        paytable=paytable,
        inputs=inputs,
        lines=tuple(lines),
        readings=(
            _CARDS_READINGS[paytable.cards],
            *_meter_readings(paytable),
            *readings(classes, paytable),
        ),
        tray_return=tray_return,
        meter_coefficient=coefficient,
        player_return=player_return,
        break_even_meter=break_even,
        envy_triggers=triggers,
        envy_per_round=envy,
        long_run=long_run,
    )


# ---------------------------------------------------------------- display


def decimal_text(value: Fraction, places: int) -> str:
    """``value`` rounded half-even to ``places`` decimals, as text (no float involved)."""
    with localcontext() as ctx:
        ctx.prec = 60
        exact = Decimal(value.numerator) / Decimal(value.denominator)
        return str(exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN))


def fraction_text(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"


def cents_ceil(units: Fraction) -> int:
    """The smallest whole number of cents not below ``units``."""
    return -((-units.numerator) // (units.denominator * UNITS_PER_CENT))


def cents_text(units: Fraction) -> str:
    """Exact cents to the unit (four decimals), e.g. ``79.1855``."""
    return decimal_text(units / UNITS_PER_CENT, 4)


def dollars_text(units: Fraction) -> str:
    return "$" + f"{Decimal(decimal_text(units / 10**6, 2)):,}"


def _ratio(value: Fraction) -> dict[str, str]:
    return {
        "fraction": fraction_text(value),
        "decimal": decimal_text(value, 12),
        "percent": decimal_text(value * 100, 6),
    }


def to_json(sheet: ParSheet) -> dict[str, Any]:
    """The sheet as JSON-ready data. Key names are a contract (docs/par.md)."""
    table = sheet.paytable
    long_run: dict[str, Any] | None = None
    if sheet.long_run is not None:
        lr = sheet.long_run
        average = lr.average_meter_at_hit
        long_run = {
            "meter_rate": fraction_text(lr.meter_rate),
            "reserve_rate": fraction_text(lr.reserve_rate),
            "seed_cents": cents_ceil(Fraction(lr.seed)),
            "reset_probability": fraction_text(lr.reset_probability),
            "return": _ratio(lr.player_return),
            "hold": _ratio(lr.hold),
            "hold_with_envy": _ratio(lr.hold_with_envy),
            "average_meter_at_hit_cents": None if average is None else cents_text(average),
            "average_meter_at_hit_units": None if average is None else fraction_text(average),
        }
    return {
        "paytable": table.id,
        "name": table.name,
        "game": table.game.value,
        "cards": table.cards.value,
        "wager_cents": table.wager // UNITS_PER_CENT,
        "meter_cents": cents_text(Fraction(sheet.inputs.meter_units)),
        "readings": list(sheet.readings) + list(table.notes),
        "warnings": list(sheet.warnings),
        "hands": [
            {
                "hand": ln.hand.value,
                "pays": ln.pays,
                "probability": fraction_text(ln.probability),
                "probability_decimal": decimal_text(ln.probability, 15),
                "one_in": None if ln.probability == 0 else decimal_text(1 / ln.probability, 2),
                "pay_cents": cents_text(ln.pay_at_meter),
                "return": fraction_text(ln.return_share),
                "return_decimal": decimal_text(ln.return_share, 12),
                "envy_cents": ln.envy // UNITS_PER_CENT,
            }
            for ln in sheet.lines
        ],
        "return": _ratio(sheet.player_return),
        "house_edge": _ratio(1 - sheet.player_return),
        "break_even_meter_cents": (
            None if sheet.break_even_meter is None else cents_ceil(sheet.break_even_meter)
        ),
        "break_even_meter_units": (
            None if sheet.break_even_meter is None else fraction_text(sheet.break_even_meter)
        ),
        "envy_players": sheet.inputs.envy_players,
        "non_betting_players": sheet.inputs.non_bettors,
        "envy_requires_trigger_wager": table.envy_requires_trigger_wager,
        "envy_triggers": sheet.envy_triggers,
        "envy_per_round_cents": cents_text(sheet.envy_per_round),
        "envy_per_round_units": fraction_text(sheet.envy_per_round),
        "return_with_envy": _ratio(sheet.return_with_envy),
        "long_run": long_run,
    }


def render_text(sheet: ParSheet) -> str:
    """A human-readable sheet."""
    data = to_json(sheet)
    table = sheet.paytable
    out = [
        f"PAR sheet: {table.id} - {table.name}",
        f"wager {dollars_text(Fraction(table.wager))}, meter "
        f"{dollars_text(Fraction(sheet.inputs.meter_units))}",
        "",
        f"{'hand':<22}{'pays':<16}{'probability':>22}{'1 in':>16}{'return':>14}",
    ]
    for ln, row in zip(sheet.lines, data["hands"], strict=True):
        one_in = row["one_in"] or "-"
        out.append(
            f"{ln.hand.value:<22}{ln.pays:<16}{row['probability_decimal']:>22}"
            f"{one_in:>16}{decimal_text(ln.return_share * 100, 4) + '%':>14}"
        )
        out.append(f"{'':<38}= {row['probability']}")
    out.append("")
    out.append(
        f"return per unit wagered: {data['return']['percent']}% (= {data['return']['fraction']})"
    )
    if sheet.break_even_meter is None:
        out.append("break-even meter: none (nothing pays off the meter)")
    else:
        whole_cents = cents_ceil(sheet.break_even_meter) * UNITS_PER_CENT
        out.append(
            f"break-even meter: {dollars_text(Fraction(whole_cents))}"
            f" (exact {cents_text(sheet.break_even_meter)} cents)"
        )
    out.append(
        f"envy per round to a bettor with {sheet.envy_triggers} other triggering player(s): "
        f"{data['envy_per_round_cents']} cents; return with envy "
        f"{data['return_with_envy']['percent']}%"
    )
    if sheet.long_run is not None:
        lr = data["long_run"]
        out.append(
            f"long run (meter rate {lr['meter_rate']}, reserve rate {lr['reserve_rate']}, "
            f"seed {dollars_text(Fraction(sheet.long_run.seed))}):"
        )
        out.append(
            f"  player return {lr['return']['percent']}%, hold {lr['hold']['percent']}%"
            f", hold after envy {lr['hold_with_envy']['percent']}%"
        )
        if lr["average_meter_at_hit_cents"] is not None:
            avg = sheet.long_run.average_meter_at_hit
            assert avg is not None
            out.append(f"  average meter at a hit {dollars_text(avg)}")
    if data["warnings"]:
        out.append("")
        out.extend(f"WARNING: {line}" for line in data["warnings"])
    if data["readings"]:
        out.append("")
        out.append("readings:")
        out.extend(f"  - {line}" for line in data["readings"])
    return "\n".join(out)
