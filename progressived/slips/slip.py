"""A payout slip as the ledger stores it: the ``slip_issued`` and ``slip_voided`` rows' data.

The stored row is the slip's triplicate (N.J.A.C. 13:69D-1.40(d): the stored data of a
computer-generated slip must not be changeable after it is made): the original, the
duplicate, a reprint and the PDF are all drawn from it, and the hash chain detects any
change to it. Field names are a contract with docs/slips.md, ``progressivectl slip show
--json`` and the reconciliation.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

ISSUED = "slip_issued"
VOIDED = "slip_voided"
KINDS = (ISSUED, VOIDED)


class Source(enum.StrEnum):
    """What the slip pays: a meter award, a fixed pay from the tray, an envy bonus."""

    METER = "meter"
    TRAY = "tray"
    ENVY = "envy"


class VoidCause(enum.StrEnum):
    """Why a slip was voided: its award was reversed, or an operator spoiled it."""

    AWARD_REVERSED = "award-reversed"
    OPERATOR = "operator"


@dataclass(frozen=True, slots=True, kw_only=True)
class Slip:
    """One payout slip. Amounts are integer units (1 unit = $0.000001); ``units`` is the
    amount to pay, whole cents. ``award`` names the award it pays (``ROUND:SEAT:HAND`` for
    a meter or tray pay, ``ROUND:SEAT:envy:FROM_SEAT:HAND`` for an envy bonus): every
    award has exactly one live slip (docs/slips.md, "Reconciliation")."""

    serial: str
    number: int
    award: str
    source: Source
    property: str
    table_id: str
    table: str
    asset: str
    location: str
    game: str
    paytable: str
    round: int
    seat: int
    hand: str
    hand_name: str
    from_seat: int  # envy: the seat whose hand paid it (0 otherwise)
    wager_units: int
    meter: str | None
    link: str | None  # the link that answered a linked meter's award
    meter_before_units: int | None
    meter_after_units: int | None
    units: int
    pay: str  # how it was priced: "100% of main", "500 for 1", "envy for Royal Flush"
    percent: str | None  # a meter award's exact percentage of the meter, as a fraction
    share_of: int
    winnings_units: int
    payment: str
    preparer: str
    taxable: bool
    notation: str
    signatures: tuple[str, ...]
    notices: tuple[str, ...]
    reissue_of: str | None = None
    # The copies to print (``ORIGINAL``, ``DUPLICATE``); none on a table without a printer.
    copies: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["source"] = self.source.value
        out["signatures"] = list(self.signatures)
        out["notices"] = list(self.notices)
        out["copies"] = list(self.copies)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Slip:
        """The slip of a ``slip_issued`` row's data (unknown keys are ignored)."""
        kwargs = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        kwargs["source"] = Source(data["source"])
        kwargs["signatures"] = tuple(data["signatures"])
        kwargs["notices"] = tuple(data["notices"])
        kwargs["copies"] = tuple(data.get("copies", ()))
        return cls(**kwargs)


@dataclass(frozen=True, slots=True, kw_only=True)
class Void:
    """A ``slip_voided`` row's data: the slip marked VOID, why and by whom (its preparer
    signs the printed VOID)."""

    serial: str
    number: int
    award: str
    cause: VoidCause
    reason: str
    by: str
    reissued_as: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cause"] = self.cause.value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Void:
        kwargs = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        kwargs["cause"] = VoidCause(data["cause"])
        return cls(**kwargs)
