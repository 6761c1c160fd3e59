"""Exact money: integer amounts in a sub-cent unit.

Every amount the controller keeps is an ``int`` of *units*, where one unit is one
millionth of a dollar (1 cent = 10,000 units). Contribution rates such as 0.0325 of a
$1 wager (3.25 cents) are therefore exact, and nothing is ever a float. Displayed and
paid amounts are truncated to the cent; the truncated part stays where it was.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

UNITS_PER_CENT = 10_000
UNITS_PER_DOLLAR = 100 * UNITS_PER_CENT

_AMOUNT_RE = re.compile(r"^\$?\s*(?P<num>[0-9][0-9,]*(?:\.[0-9]+)?|\.[0-9]+)$")


class MoneyError(ValueError):
    """An amount or rate that cannot be represented exactly."""


def dollars(value: Decimal | int | str) -> int:
    """Convert an exact dollar amount (``Decimal("12.34")``, ``"$1,000"``, ``5``) to units.

    Amounts finer than one unit are refused rather than rounded: a configured amount
    that cannot be held exactly is a configuration error, not something to guess at.
    """
    if isinstance(value, bool):
        raise MoneyError(f"not an amount: {value!r}")
    if isinstance(value, str):
        text = value.strip()
        negative = text.startswith("-")
        if negative:
            text = text[1:].strip()
        match = _AMOUNT_RE.match(text)
        if match is None:
            raise MoneyError(f"not an amount: {value!r} (expected e.g. 1000, 1000.00 or $1,000)")
        number = Decimal(match.group("num").replace(",", ""))
        if negative:
            number = -number
    elif isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, Decimal):
        number = value
    else:  # float and anything else: refuse, floats are never money here
        raise MoneyError(f"amounts must be exact decimals, not {type(value).__name__}: {value!r}")
    try:
        scaled = number * UNITS_PER_DOLLAR
        if not scaled.is_finite():
            raise MoneyError(f"not a finite amount: {value!r}")
        units = int(scaled)
    except InvalidOperation as exc:  # pragma: no cover - Decimal guards above
        raise MoneyError(f"not an amount: {value!r}") from exc
    if Decimal(units) != scaled:
        raise MoneyError(f"'{value}' is finer than one millionth of a dollar")
    return units


def rate(value: Decimal | int | str) -> Fraction:
    """Parse an exact contribution rate (``"0.15"``, ``Decimal("0.0325")``, ``"1.5%"``)."""
    if isinstance(value, bool) or not isinstance(value, (Decimal, int, str)):
        raise MoneyError(f"rates must be exact decimals, not {type(value).__name__}: {value!r}")
    text = str(value).strip()
    percent = text.endswith("%")
    if percent:
        text = text[:-1].strip()
    try:
        number = Decimal(text)
    except InvalidOperation as exc:
        raise MoneyError(f"not a rate: {value!r} (expected e.g. 0.15 or 15%)") from exc
    if not number.is_finite():
        raise MoneyError(f"not a finite rate: {value!r}")
    fraction = Fraction(number)
    if percent:
        fraction /= 100
    if fraction < 0 or fraction > 1:
        raise MoneyError(f"rate {value} must be between 0 and 1 (0% and 100%)")
    return fraction


def truncate_to_cent(units: int) -> int:
    """The largest whole-cent amount not above ``units`` (for non-negative amounts)."""
    if units < 0:
        raise MoneyError(f"cannot truncate a negative amount: {units}")
    return units - units % UNITS_PER_CENT


def cents(units: int) -> int:
    """Whole cents in ``units``, truncated toward zero (what a sign shows and a player is paid)."""
    return units // UNITS_PER_CENT if units >= 0 else -((-units) // UNITS_PER_CENT)


def display(units: int) -> str:
    """Format as a sign would: ``$1,234.56`` (truncated to the cent)."""
    return display_cents(cents(units))


def display_cents(whole: int) -> str:
    """Whole cents as every sign shows money (docs/mqtt.md, "Money"): ``$1,234.56``."""
    sign = "-" if whole < 0 else ""
    whole = abs(whole)
    return f"{sign}${whole // 100:,}.{whole % 100:02d}"


def display_exact(units: int) -> str:
    """Format with every sub-cent digit, for audit output: ``$1,234.567891``."""
    sign = "-" if units < 0 else ""
    units = abs(units)
    return f"{sign}${units // UNITS_PER_DOLLAR:,}.{units % UNITS_PER_DOLLAR:06d}"
