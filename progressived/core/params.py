"""Progressive parameters: what a table's controller holds for each meter (level).

Pure data. Built from configuration by :mod:`progressived.config.table`, or directly in tests
and by ``progressivectl simulate``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from fractions import Fraction

from progressived.core.money import UNITS_PER_CENT, UNITS_PER_DOLLAR, display, display_exact
from progressived.core.paytable import Paytable


class AboveLimit(enum.StrEnum):
    """Where a contribution goes once the meter has reached its limit."""

    RESERVE = "reserve"
    OVERFLOW = "overflow"


class Policy(enum.StrEnum):
    """House policy for several meter awards in one round (at a table), or for several
    claims on one linked meter within the link's split window (at a link)."""

    SEQUENTIAL = "sequential"  # each award computed on the meter as it stands at its turn
    SPLIT = "split"  # awards for the same hand share what one award would receive


class AwardOrder(enum.StrEnum):
    """The order awards are handled in. The rules say counter-clockwise."""

    COUNTER_CLOCKWISE = "counter-clockwise"  # from the dealer's right: highest seat first
    CLOCKWISE = "clockwise"  # lowest seat first


DEFAULT_SEED = 1_000 * UNITS_PER_DOLLAR


@dataclass(frozen=True, slots=True)
class MeterParams:
    """One progressive meter (level).

    ``seed`` is the reset amount after a 100% award; ``start`` the amount the meter is
    first funded with (defaults to ``seed``). ``rate`` and ``reserve_rate`` are the exact
    fractions of each wager posted to the meter and to its reserve; the rest is retained
    by the house.
    """

    id: str = "main"
    seed: int = DEFAULT_SEED
    rate: Fraction = Fraction(0)
    reserve_rate: Fraction = Fraction(0)
    limit: int | None = None
    above_limit: AboveLimit = AboveLimit.RESERVE
    start: int | None = None
    # A linked meter: its money is the link's; the table holds none of it.
    link: str | None = None
    # The link's id for this meter when it differs from the table's (``id`` is what the
    # paytable's percentage pays name, e.g. ``main``; the link may call it ``pmg``).
    link_meter: str | None = None

    @property
    def start_units(self) -> int:
        return self.seed if self.start is None else self.start

    @property
    def link_meter_id(self) -> str:
        """The id this meter has at its link: in messages to it and in its meter topic."""
        return self.link_meter or self.id


@dataclass(frozen=True, slots=True)
class TableParams:
    """Everything the engine needs to run one table's rounds."""

    table_id: str
    paytable: Paytable
    meters: tuple[MeterParams, ...] = (MeterParams(),)
    seats: int = 7
    wager: int | None = None  # units; None = the paytable's wager
    policy: Policy = Policy.SEQUENTIAL
    award_order: AwardOrder = AwardOrder.COUNTER_CLOCKWISE
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def wager_units(self) -> int:
        return self.paytable.wager if self.wager is None else self.wager

    def reset_seed(self, meter_id: str) -> int:
        """The seed (start and reset amount) of ``meter_id``.

        A paytable that states its seed (PMG: "the envy and seed amounts adjust up or down
        accordingly with changes made to the wager amount") fixes it for the meters it pays
        a percentage of, scaled to the configured wager like envy; otherwise the meter's.
        """
        stated = self.paytable.seed
        if stated is not None and meter_id in self.paytable.meters:
            return stated * self.wager_units // self.paytable.wager
        return self.meter(meter_id).seed

    def start_units(self, meter: MeterParams) -> int:
        """The amount ``meter`` is first funded with (its ``start``, else its seed)."""
        return self.reset_seed(meter.id) if meter.start is None else meter.start

    def meter(self, meter_id: str) -> MeterParams:
        for meter in self.meters:
            if meter.id == meter_id:
                return meter
        raise KeyError(meter_id)

    @property
    def meter_ids(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.meters)

    @property
    def linked_meters(self) -> frozenset[str]:
        """The meters a link holds (docs/link.md); empty for a single table."""
        return frozenset(m.id for m in self.meters if m.link is not None)

    def link_meter_ids(self) -> dict[str, str]:
        """Each linked meter's id at the link, by the table's meter id."""
        return {m.id: m.link_meter_id for m in self.meters if m.link is not None}

    @property
    def link_id(self) -> str | None:
        """The link the linked meters belong to (one link per table), or ``None``."""
        return next((m.link for m in self.meters if m.link is not None), None)

    def is_linked(self, meter_id: str) -> bool:
        return any(m.id == meter_id and m.link is not None for m in self.meters)

    def seat_order(self) -> tuple[int, ...]:
        """Seats in the order awards are handled."""
        seats = range(1, self.seats + 1)
        if self.award_order is AwardOrder.COUNTER_CLOCKWISE:
            return tuple(reversed(seats))
        return tuple(seats)

    def order_key(self, seat: int) -> int:
        return self.seat_order().index(seat)


class ParamsError(ValueError):
    """Parameters that cannot run a table."""


def _money(units: int) -> str:
    return display(units) if units % UNITS_PER_CENT == 0 else display_exact(units)


def seed_conflict(params: TableParams, meter_id: str, seed: int) -> str | None:
    """Why a seed set explicitly for ``meter_id`` cannot stand, or ``None``.

    Where the paytable states the seed (and that it follows the wager), a configured seed
    other than the scaled one would contradict the rule, so it is refused, not ignored.
    """
    paytable = params.paytable
    if paytable.seed is None or meter_id not in paytable.meters:
        return None
    wanted = params.reset_seed(meter_id)
    if seed == wanted:
        return None
    return (
        f"{_money(seed)} differs from {_money(wanted)}, the seed paytable "
        f"{paytable.id} requires at a {_money(params.wager_units)} wager "
        f"({paytable.seed_rule}); leave it out or set it to that"
    )


def sub_cent(wager: int) -> str | None:
    """Why ``wager`` (units) cannot be a wager, or ``None``: a wager is whole cents.

    A player stakes cents; a finer wager would make every "X for 1" pay a fraction of a
    cent that can only be truncated, so it is refused rather than silently rounded.
    """
    if wager % UNITS_PER_CENT:
        return f"{display_exact(wager)} is finer than a cent (a wager is a whole number of cents)"
    return None


def _mapping_hint(params: TableParams, meter_id: str) -> str:
    """For a linked meter named after the link's id: how to name it the paytable's way."""
    linked = [m for m in params.meters if m.link is not None and m.id not in params.paytable.meters]
    if not linked:
        return ""
    m = linked[0]
    return (
        f"; a linked meter keeps the paytable's id and names the link's meter with link_meter: "
        f'id = "{meter_id}", link = "{m.link}", link_meter = "{m.link_meter_id}"'
    )


def validate(params: TableParams) -> None:
    """Refuse parameters the engine cannot honour exactly; the message names the setting."""
    if not 1 <= params.seats <= 12:
        raise ParamsError(f"table.seats: {params.seats} is not between 1 and 12")
    if params.wager_units <= 0:
        raise ParamsError("progressive.wager: must be positive")
    if problem := sub_cent(params.wager_units):
        raise ParamsError(f"progressive.wager: {problem}")
    _validate_meters(params)
    _validate_scaling(params)


def _validate_meters(params: TableParams) -> None:
    """``[[progressive.meters]]``: ids, one link, each meter's amounts, the paytable's meters."""
    ids = [m.id for m in params.meters]
    if not ids:
        raise ParamsError("progressive.meters: at least one meter is needed")
    if len(set(ids)) != len(ids):
        raise ParamsError(f"progressive.meters: duplicate meter id in {ids}")
    links = {m.link for m in params.meters if m.link is not None}
    if len(links) > 1:
        raise ParamsError(f"progressive.meters: one table joins one link, not {sorted(links)}")
    for index, m in enumerate(params.meters):
        _validate_meter(params, f"progressive.meters[{index}] ({m.id})", m)
    at_link = [m.link_meter_id for m in params.meters if m.link is not None]
    if len(set(at_link)) != len(at_link):
        raise ParamsError(
            f"progressive.meters: two linked meters name one meter at the link ({at_link})"
        )
    for meter_id in params.paytable.meters:
        if meter_id not in ids:
            hint = _mapping_hint(params, meter_id)
            raise ParamsError(
                f"paytable {params.paytable.id}: pays a percentage of meter {meter_id!r}, "
                f"which is not configured (meters: {', '.join(ids)}){hint}"
            )


def _validate_scaling(params: TableParams) -> None:
    """The paytable's fixed amounts scale to whole units at this table's wager."""
    base = params.paytable.wager
    if params.paytable.seed is not None and (params.paytable.seed * params.wager_units) % base:
        raise ParamsError(
            f"progressive.wager: paytable {params.paytable.id}'s seed does not scale to a whole "
            "unit at this wager"
        )
    for rule in params.paytable.hands:
        for what, amount in (("pay", rule.pay.amount), ("envy", rule.envy)):
            if amount and (amount * params.wager_units) % base:
                raise ParamsError(
                    f"progressive.wager: the {rule.hand.value} {what} does not scale to a whole "
                    f"unit at this wager"
                )


def _validate_meter(params: TableParams, key: str, m: MeterParams) -> None:
    """One local meter's seed, rates, start and limit (a linked one has only its ids)."""
    if m.link is not None:
        if m.rate or m.reserve_rate or m.limit is not None or m.start is not None:
            raise ParamsError(f"{key}: a linked meter's rates, limit and start are the link's")
        return
    if m.link_meter is not None:
        raise ParamsError(f"{key}.link_meter: only a linked meter (with `link`) has one")
    if m.seed <= 0:
        raise ParamsError(f"{key}.seed: must be positive")
    if m.rate < 0 or m.reserve_rate < 0:
        raise ParamsError(f"{key}: rates must not be negative")
    if m.rate + m.reserve_rate > 1:
        raise ParamsError(f"{key}: rate + reserve_rate is above 1 (more than the wager)")
    if m.start is not None and m.start < 0:
        raise ParamsError(f"{key}.start: must not be negative")
    if m.limit is not None:
        if m.limit < params.reset_seed(m.id):
            raise ParamsError(f"{key}.limit: below the seed amount")
        if m.limit < params.start_units(m):
            raise ParamsError(
                f"{key}.limit: below the starting meter "
                "(a limit must be at least the current amount)"
            )
