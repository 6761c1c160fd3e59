"""A slip as lines of text: what the receipt printer prints, ``slip show`` shows and the PDF
draws, from the one stored record (pure).

Every copy carries its label (``ORIGINAL``, ``DUPLICATE``, ``REPRINT n``), a spoiled or
reversed slip ``*** VOID ***`` with why and who, the amount in digits and in words (check
style: ``ONE THOUSAND AND 00/100 DOLLARS``, words by num2words) and the signature lines
that apply, each with room to sign.
"""

from __future__ import annotations

from dataclasses import dataclass

from num2words import num2words

from progressived.core.money import UNITS_PER_CENT, cents, display
from progressived.slips.slip import Slip, Void

WIDTH = 42  # characters per line of an 80 mm receipt in its condensed font
SIGN_LINE = "_" * 24


@dataclass(frozen=True, slots=True)
class Copy:
    """Which copy: ``ORIGINAL``, ``DUPLICATE`` or ``REPRINT n`` (n >= 1)."""

    label: str

    @staticmethod
    def reprint(n: int) -> Copy:
        return Copy(f"REPRINT {n}")


ORIGINAL = Copy("ORIGINAL")
DUPLICATE = Copy("DUPLICATE")


def amount_in_words(units: int) -> str:
    """``ONE THOUSAND TWO HUNDRED AND 50/100 DOLLARS`` (whole cents, truncated)."""
    whole = cents(units)
    # num2words writes British "and"s ("two hundred and thirty"): a check writes none, so
    # the one AND left is the one before the cents.
    words = str(num2words(whole // 100, lang="en"))
    words = words.replace(",", "").replace("-", " ").replace(" and ", " ")
    return f"{words} and {whole % 100:02d}/100 dollars".upper()


def qr_text(slip: Slip, row_hash: str) -> str:
    """What the slip's QR code holds, for the cage to check the slip against the ledger:
    the serial, the amount in cents and the hash of the slip's ledger row."""
    return f"PSLIP1 {slip.serial} {slip.units // UNITS_PER_CENT} {row_hash}"


def _pair(label: str, value: str, width: int) -> str:
    gap = width - len(label) - len(value)
    return f"{label}{' ' * max(gap, 1)}{value}"


def lines(
    slip: Slip, at: str, copy: Copy, *, void: Void | None = None, width: int = WIDTH
) -> list[str]:
    """The slip's lines for ``copy`` (``at``: when it was issued, the row's UTC time)."""
    out = []
    if slip.property:
        out.append(slip.property.center(width).rstrip())
    out.append("PROGRESSIVE JACKPOT PAYOUT SLIP".center(width).rstrip())
    out.append(copy.label.center(width).rstrip())
    if void is not None:
        out.append("*** VOID ***".center(width).rstrip())
    out.append("")
    when = at.replace("T", " ").split(".")[0].rstrip("Z") + " UTC"
    meter_rows: list[tuple[str, str]] = []
    if slip.meter is not None and slip.meter_before_units is not None:
        name = slip.meter if slip.link is None else f"{slip.meter} (link {slip.link})"
        meter_rows.append((f"Meter {name} before", display(slip.meter_before_units)))
        if slip.meter_after_units is not None:
            meter_rows.append(("Meter after", display(slip.meter_after_units)))
    rows = [
        ("Serial", slip.serial),
        ("Date/time", when),
        ("Table", slip.table if slip.table == slip.table_id else f"{slip.table} ({slip.table_id})"),
        ("Asset", slip.asset or "-"),
        ("Location", slip.location or "-"),
        ("Game", slip.game),
        ("Paytable", slip.paytable),
        ("Round / seat", f"{slip.round} / {slip.seat}"),
        ("Hand", slip.hand_name),
        ("Wager", display(slip.wager_units)),
        *meter_rows,
        ("Paid as", slip.source.value),
    ]
    out += [_pair(f"{label}:", value, width) for label, value in rows]
    out += _wrapped(f"Pay: {slip.pay}", width)
    if slip.reissue_of is not None:
        out.append(_pair("Reissue of:", slip.reissue_of, width))
    out += ["", _pair("AMOUNT:", display(slip.units), width)]
    out += _wrapped(amount_in_words(slip.units), width)
    out += [_pair("Payment:", slip.payment, width), _pair("Prepared by:", slip.preparer, width)]
    out += ["", *_wrapped(slip.notation, width)]
    out += [line for notice in slip.notices for line in _wrapped(f"NOTE: {notice}", width)]
    for role in slip.signatures:
        out += ["", f"{role}:", f"  {SIGN_LINE}"]
    if void is not None:
        out += ["", *_wrapped(f"VOID: {void.reason} ({void.cause.value})", width)]
        out += [f"Voided by: {void.by}", "Preparer:", f"  {SIGN_LINE}"]
        if void.reissued_as is not None:
            out.append(f"Reissued as: {void.reissued_as}")
    return out


def _wrapped(text: str, width: int) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` characters."""
    out: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*out, line] if line else out
