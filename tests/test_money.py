"""Exact money: units, parsing, truncation and display."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from progressived.core.money import (
    UNITS_PER_CENT,
    MoneyError,
    cents,
    display,
    display_exact,
    dollars,
    rate,
    truncate_to_cent,
)


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("1000", 1_000_000_000),
        ("$1,000.00", 1_000_000_000),
        ("0.01", 10_000),
        (".5", 500_000),
        ("2,500", 2_500_000_000),
        ("0.000001", 1),
        ("-5", -5_000_000),
    ],
)
def test_dollars_parses_exactly(text: str, units: int) -> None:
    assert dollars(text) == units


def test_dollars_accepts_decimal_and_int_but_never_float() -> None:
    assert dollars(Decimal("12.34")) == 12_340_000
    assert dollars(7) == 7_000_000
    with pytest.raises(MoneyError, match="exact decimals"):
        dollars(0.1)
    with pytest.raises(MoneyError):
        dollars(True)


@pytest.mark.parametrize("bad", ["abc", "1.2.3", "$", "1e5", "0.0000001", "NaN"])
def test_dollars_refuses_what_it_cannot_hold(bad: str) -> None:
    with pytest.raises(MoneyError):
        dollars(bad)


def test_rate_is_an_exact_fraction() -> None:
    assert rate("0.0325") == Fraction(325, 10_000)
    assert rate("15%") == Fraction(15, 100)
    assert rate(Decimal("0.1")) == Fraction(1, 10)
    for bad in ("1.5", "-0.1", "x", "150%"):
        with pytest.raises(MoneyError):
            rate(bad)


def test_truncation_keeps_the_sub_cent_part_out_of_the_pay() -> None:
    assert truncate_to_cent(1_234_567_891) == 1_234_560_000
    assert cents(1_234_567_891) == 123_456
    assert display(1_234_567_891) == "$1,234.56"
    assert display_exact(1_234_567_891) == "$1,234.567891"
    assert display(-5 * UNITS_PER_CENT) == "-$0.05"
    with pytest.raises(MoneyError):
        truncate_to_cent(-1)
