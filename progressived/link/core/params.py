"""What a link controller holds: its linked meters, member tables and claim policy.

Pure data (the configuration loader that builds it comes with the link controller). Where a
meter goes above its limit and how several claims share a meter mean what they mean at a
table: the enums are :mod:`progressived.core.params`'s (``AboveLimit``, ``Policy``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from progressived.core.money import UNITS_PER_CENT
from progressived.core.params import AboveLimit, Policy
from progressived.engine import accounts


@dataclass(frozen=True, slots=True)
class MeterSpec:
    """One linked meter.

    ``hands`` maps each hand the meter pays to its exact fraction of the meter (PMG: royal
    flush 1, straight flush 1/10). ``wager_base`` is the wager (units) the seed is stated
    for; tables scale envy from it the same way.
    """

    id: str
    seed: int
    rate: Fraction
    reserve_rate: Fraction = Fraction(0)
    limit: int | None = None
    above_limit: AboveLimit = AboveLimit.RESERVE
    wager_base: int = 100 * UNITS_PER_CENT
    hands: Mapping[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LinkParams:
    """The link: its id, meters, member tables and claim policy."""

    link_id: str
    meters: tuple[MeterSpec, ...]
    tables: frozenset[str]
    policy: Policy = Policy.SEQUENTIAL
    split_window_ms: int = 2_000
    keep_results: int = 256  # stored results per table (older repeats are refused)

    def meter(self, meter_id: str) -> MeterSpec | None:
        for spec in self.meters:
            if spec.id == meter_id:
                return spec
        return None


class LinkParamsError(ValueError):
    """Link parameters that cannot run a linked meter exactly."""


def validate(params: LinkParams) -> None:
    """Refuse parameters the book cannot honour; the message names the setting."""
    ids = [m.id for m in params.meters]
    if not ids or len(set(ids)) != len(ids):
        raise LinkParamsError(f"link.meters: need at least one, ids unique (got {ids})")
    if not params.tables:
        raise LinkParamsError("link.tables: at least one member table")
    if params.split_window_ms < 0 or params.keep_results < 1:
        raise LinkParamsError("link: split_window_ms >= 0 and keep_results >= 1")
    for m in params.meters:
        if m.seed <= 0 or m.wager_base <= 0 or m.wager_base % UNITS_PER_CENT:
            raise LinkParamsError(f"meter {m.id}: seed > 0, wager_base a positive whole cent")
        if m.rate < 0 or m.reserve_rate < 0 or m.rate + m.reserve_rate > 1:
            raise LinkParamsError(f"meter {m.id}: rates between 0 and 1, together at most 1")
        if m.limit is not None and m.limit < m.seed:
            raise LinkParamsError(f"meter {m.id}: limit below the seed")
        if not m.hands or any(not 0 < p <= 1 for p in m.hands.values()):
            raise LinkParamsError(f"meter {m.id}: hands pay a fraction in (0, 1]")


# -- accounts -----------------------------------------------------------------------------
# The table's account names where they mean the same thing; the sources are kept per meter
# so that the identity holds for each linked meter on its own.


def linked_wagers(meter_id: str) -> str:
    """Wagers locked at member tables on this meter (source)."""
    return f"linked_wagers:{meter_id}"


def house_retained(meter_id: str) -> str:
    """The part of those wagers not contributed, and what a voided round the meter kept costs."""
    return f"house_retained:{meter_id}"


def holders(meter_id: str) -> tuple[str, ...]:
    """Accounts holding money owed to players: never negative."""
    return accounts.holders(meter_id)


def identity_gap(balances: Mapping[str, int], meter_id: str) -> int:
    """seed funding + contributions - (meter + reserve + overflow + pending + paid); 0 holds.

    Contributions are the wagers collected less the house's retained part; sources are
    negative balances, so the left side is their negation.
    """
    funded = -balances.get(accounts.seed_funding(meter_id), 0)
    contributed = -(
        balances.get(linked_wagers(meter_id), 0) + balances.get(house_retained(meter_id), 0)
    )
    held = sum(balances.get(a, 0) for a in holders(meter_id))
    paid = balances.get(accounts.paid_attendant(meter_id), 0)
    return funded + contributed - held - paid
