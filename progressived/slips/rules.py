"""What a site decides about its payout slips: names, the series, the taxable rule, signatures.

Plain data, built from the ``[slips]`` section by :mod:`progressived.config.slips` (or
directly in tests). The defaults are the U.S. table-game ones: a payout is *taxable*
(reportable on IRS Form W-2G, "other gambling") when the winnings are $600 or more **and**
at least 300 times the wager; a slip carries the preparer's signature line always, a
verifier's from $1,200 (Mississippi 13-7-9.3: "above $1,199.99") and a manager's above
$5,000; a payout of $100,000 or more carries the notice that the commission is told before
it is paid (Mississippi 35-5-06-01-103). Jurisdictions differ, so every figure is a setting.
"""

from __future__ import annotations

from dataclasses import dataclass

from progressived.core.money import UNITS_PER_CENT, UNITS_PER_DOLLAR


@dataclass(frozen=True, slots=True)
class Threshold:
    """A line that applies to a payout of ``from_units`` or more (a signature, a notice)."""

    from_units: int
    text: str


DEFAULT_SIGNATURES = (
    Threshold(0, "Preparer"),
    Threshold(1_200 * UNITS_PER_DOLLAR, "Verifier"),
    Threshold(5_000 * UNITS_PER_DOLLAR + UNITS_PER_CENT, "Manager"),
)
DEFAULT_NOTICES = (
    Threshold(100_000 * UNITS_PER_DOLLAR, "Gaming commission notified before payment"),
)
TAXABLE_TEXT = "TAXABLE - report on IRS Form W-2G"
NON_TAXABLE_TEXT = "NON-TAXABLE"


@dataclass(frozen=True, slots=True)
class SlipRules:
    """Everything a slip takes from the site rather than from the award.

    ``prefix`` + a number of ``digits`` digits is the serial (``T1-000042``); the number
    is the table's one continuous series, so a changed prefix does not restart it.
    ``taxable_from`` (units) and ``taxable_multiple`` (of the wager) are the taxable rule:
    both must hold (a ``taxable_multiple`` of 0 drops the second condition).
    """

    prefix: str
    digits: int = 6
    property_name: str = ""
    table_name: str = ""
    asset: str = ""
    location: str = ""
    payment: str = "cash"
    taxable_from: int = 600 * UNITS_PER_DOLLAR
    taxable_multiple: int = 300
    taxable_text: str = TAXABLE_TEXT
    non_taxable_text: str = NON_TAXABLE_TEXT
    signatures: tuple[Threshold, ...] = DEFAULT_SIGNATURES
    notices: tuple[Threshold, ...] = DEFAULT_NOTICES
    copies: tuple[str, ...] = ()  # the copies printed of each slip (none: no printer)

    def serial(self, number: int) -> str:
        """The serial printed for ``number`` (more digits than ``digits`` when it outgrows them)."""
        return f"{self.prefix}{number:0{self.digits}d}"

    def taxable(self, winnings: int, wager: int) -> bool:
        """The taxable rule: winnings of ``taxable_from`` or more and at least
        ``taxable_multiple`` times the wager."""
        return winnings >= self.taxable_from and winnings >= self.taxable_multiple * wager

    def signatures_for(self, units: int) -> tuple[str, ...]:
        """The signature lines a payout of ``units`` carries, lowest threshold first."""
        return _applying(self.signatures, units)

    def notices_for(self, units: int) -> tuple[str, ...]:
        return _applying(self.notices, units)


def _applying(lines: tuple[Threshold, ...], units: int) -> tuple[str, ...]:
    return tuple(t.text for t in sorted(lines, key=lambda t: t.from_units) if units >= t.from_units)
