"""The ``[slips]`` section: the payout slips' names, series, taxable rule and signatures.

Validated like every other section (unknown keys refused with a "did you mean", amounts
exact to the cent); :func:`slip_rules` turns it into the pure
:class:`~progressived.slips.rules.SlipRules` the ledger issues slips with, and
:func:`describe` is the line ``check-config`` shows. docs/configuration.md lists the keys,
docs/slips.md says where the defaults come from.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import Field, field_validator, model_validator

from progressived.core.money import UNITS_PER_CENT, MoneyError, display, dollars
from progressived.runtime.config_files import StrictModel
from progressived.slips.rules import (
    DEFAULT_NOTICES,
    DEFAULT_SIGNATURES,
    NON_TAXABLE_TEXT,
    TAXABLE_TEXT,
    SlipRules,
    Threshold,
)

Amount = Decimal | int | str
_TEXT = r"^[^|\r\n]{1,80}$"  # printed on one line, and hashable into the chain unambiguously


def _cents(value: Amount) -> int:
    try:
        units = dollars(value)
    except MoneyError as exc:
        raise ValueError(str(exc)) from None
    if units < 0 or units % UNITS_PER_CENT:
        raise ValueError(f"{value}: an amount of whole cents, 0 or more")
    return units


class SignatureLine(StrictModel):
    """A signature line on slips of ``amount`` or more."""

    amount: Amount
    role: str = Field(pattern=_TEXT)

    @field_validator("amount")
    @classmethod
    def _amount(cls, value: Amount) -> Amount:
        _cents(value)
        return value


class NoticeLine(StrictModel):
    """A notice printed on slips of ``amount`` or more (the regulator told before paying)."""

    amount: Amount
    text: str = Field(pattern=_TEXT)

    @field_validator("amount")
    @classmethod
    def _amount(cls, value: Amount) -> Amount:
        _cents(value)
        return value


Copy = Literal["original", "duplicate"]
_BOTH: list[Copy] = ["original", "duplicate"]


BAUD_RATES = (9600, 19200, 38400, 57600, 115200)


class PrinterSection(StrictModel):
    """``[slips.printer]``: the ESC/POS receipt printer where the supervisor stands, on the
    network (``host``, ``port``) or on a serial line (``device``, ``baudrate``)."""

    host: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}$")
    port: int = Field(default=9100, ge=1, le=65535)
    device: str | None = Field(default=None, pattern=r"^/[A-Za-z0-9_./-]{1,254}$")
    baudrate: int = 9600
    dsrdtr: bool = True
    timeout_s: float = Field(default=5.0, gt=0, le=60)
    retry_s: float = Field(default=10.0, gt=0, le=3600)
    status: bool = True
    copies: list[Copy] = Field(default_factory=_BOTH.copy, min_length=1, max_length=2)

    @field_validator("copies")
    @classmethod
    def _once_each(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("each copy once")
        return value

    @field_validator("baudrate")
    @classmethod
    def _baud(cls, value: int) -> int:
        if value not in BAUD_RATES:
            raise ValueError(f"one of {', '.join(map(str, BAUD_RATES))}")
        return value

    @model_validator(mode="after")
    def _one_way(self) -> PrinterSection:
        if (self.host is None) == (self.device is None):
            raise ValueError("name the printer by host (network) or by device (serial)")
        return self

    @property
    def where(self) -> str:
        """``host:port``, or the serial device."""
        return self.device if self.device is not None else f"{self.host}:{self.port}"


def _default_signatures() -> list[SignatureLine]:
    return [
        SignatureLine(amount=display(t.from_units)[1:], role=t.text) for t in DEFAULT_SIGNATURES
    ]


def _default_notices() -> list[NoticeLine]:
    return [NoticeLine(amount=display(t.from_units)[1:], text=t.text) for t in DEFAULT_NOTICES]


class SlipsSection(StrictModel):
    """``[slips]``: every key has a default (the U.S. table-game rules)."""

    enabled: bool = True
    prefix: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,15}$")
    digits: int = Field(default=6, ge=1, le=12)
    property: str | None = Field(default=None, pattern=_TEXT)
    table_name: str | None = Field(default=None, pattern=_TEXT)
    asset: str | None = Field(default=None, pattern=r"^[^|\r\n]{1,40}$")
    location: str | None = Field(default=None, pattern=_TEXT)
    payment: str = Field(default="cash", pattern=_TEXT)
    taxable_from: Amount = "600.00"
    taxable_multiple: int = Field(default=300, ge=0, le=1_000_000)
    taxable_text: str = Field(default=TAXABLE_TEXT, pattern=_TEXT)
    non_taxable_text: str = Field(default=NON_TAXABLE_TEXT, pattern=_TEXT)
    signatures: list[SignatureLine] = Field(default_factory=_default_signatures, max_length=12)
    notices: list[NoticeLine] = Field(default_factory=_default_notices, max_length=12)
    printer: PrinterSection | None = None

    @field_validator("taxable_from")
    @classmethod
    def _taxable_from(cls, value: Amount) -> Amount:
        _cents(value)
        return value

    @model_validator(mode="after")
    def _one_role_each(self) -> SlipsSection:
        roles = [s.role for s in self.signatures]
        if len(set(roles)) != len(roles):
            raise ValueError("signatures: each role once")
        if self.signatures and min(_cents(s.amount) for s in self.signatures) != 0:
            raise ValueError("signatures: the first line (the preparer's) must apply from 0")
        return self


def slip_rules(section: SlipsSection, table_id: str) -> SlipRules:
    """The pure rules; the serial's prefix defaults to the table id and a dash."""
    return SlipRules(
        prefix=section.prefix if section.prefix is not None else f"{table_id}-",
        digits=section.digits,
        property_name=section.property or "",
        table_name=section.table_name or "",
        asset=section.asset or "",
        location=section.location or "",
        payment=section.payment,
        taxable_from=_cents(section.taxable_from),
        taxable_multiple=section.taxable_multiple,
        taxable_text=section.taxable_text,
        non_taxable_text=section.non_taxable_text,
        signatures=tuple(Threshold(_cents(s.amount), s.role) for s in section.signatures),
        notices=tuple(Threshold(_cents(n.amount), n.text) for n in section.notices),
        copies=tuple(c.upper() for c in section.printer.copies) if section.printer else (),
    )


def describe(section: SlipsSection, table_id: str) -> str:
    """``check-config``'s line for the section: the series, the taxable rule, signatures."""
    if not section.enabled:
        return "slips: off"
    rules = slip_rules(section, table_id)
    sigs = ", ".join(f"{t.text} from {display(t.from_units)}" for t in rules.signatures)
    taxable = f"taxable from {display(rules.taxable_from)}"
    if rules.taxable_multiple:
        taxable += f" and {rules.taxable_multiple}x the wager"
    printer = section.printer
    where = printer.where if printer is not None else "none"
    return f"slips: serials {rules.serial(1)}, ...; {taxable}; signatures: {sigs}; printer {where}"
