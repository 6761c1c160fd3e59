"""The liability report: per meter, per table and in total, opening to closing, reconciled.

For each meter of each ledger (a table's local meters; a link's linked meters)::

    variance = opening + contributions + seeds/resets - awards paid + adjustments - closing

to the unit (1 cent = 10,000 units), where opening and closing are the liability the ledger
records at the period's edges (:mod:`progressived.report.bounds`) and the flows are the
period's postings (:mod:`progressived.report.flows`), checked against the hashed rows by
verify over the period (:mod:`progressived.report.check`). A sound ledger gives 0 for
every meter; anything else is named, shown in red and makes the command exit 1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from progressived.report.expect import Expectation, expectation
from progressived.report.flows import HOLDERS, MeterFlows
from progressived.report.listed import Adjustment, Award, Change, Reset
from progressived.report.period import Period, parse_at
from progressived.report.source import LedgerPeriod

PLOT_POINTS = 1500  # at most this many points per meter line


@dataclass(frozen=True, slots=True)
class Holdings:
    """A meter's liability at one moment: meter, reserve, overflow, awards pending."""

    meter: int = 0
    reserve: int = 0
    overflow: int = 0
    pending: int = 0

    @property
    def total(self) -> int:
        return self.meter + self.reserve + self.overflow + self.pending

    @classmethod
    def of(cls, balances: dict[str, int], meter: str) -> Holdings:
        return cls(*(balances.get(f"{holder}:{meter}", 0) for holder in HOLDERS))

    def __add__(self, other: Holdings) -> Holdings:
        return Holdings(self.meter + other.meter, self.reserve + other.reserve,
                        self.overflow + other.overflow, self.pending + other.pending)


@dataclass(frozen=True)
class MeterLine:
    source: str  # the ledger's table or link id
    kind: str  # table | link
    meter: str
    opening: Holdings
    contributions: int
    contribution_count: int
    seeds: int
    resets: int
    paid: int
    paid_count: int
    adjustments: int  # meter-adjust and meter-transfer together
    closing: Holdings
    unexplained: int
    expectation: Expectation | None
    series: tuple[tuple[datetime, int, int], ...] = ()  # (time, meter, reserve) for plots
    hourly: tuple[tuple[datetime, int], ...] = ()  # (local hour, contributed)

    @property
    def variance(self) -> int:
        return (self.opening.total + self.contributions + self.seeds - self.paid
                + self.adjustments - self.closing.total)


@dataclass(frozen=True)
class Source:
    """What a report was made from: one ledger."""

    kind: str
    id: str
    location: str
    head: str  # SEQ:HASH of the ledger's last row when read
    opening_row: str  # SEQ:HASH of the last row before the period
    closing_row: str  # SEQ:HASH of the period's last row
    rows: int
    opening_from: str
    closing_from: str
    verified: bool
    problems: tuple[str, ...]


@dataclass(frozen=True)
class Report:
    period: Period
    created_at: str
    sources: tuple[Source, ...]
    meters: tuple[MeterLine, ...]
    awards: tuple[Award, ...]
    resets: tuple[tuple[str, Reset], ...]  # (ledger id, reset)
    adjustments: tuple[tuple[str, Adjustment], ...]
    changes: tuple[tuple[str, Change], ...]
    # a link's contributions by member table: (link, meter, table, wagered, contributed)
    members: tuple[tuple[str, str, str, int, int], ...] = field(default=())
    notes: tuple[str, ...] = field(default=())

    @property
    def variances(self) -> list[MeterLine]:
        return [m for m in self.meters if m.variance]

    @property
    def ok(self) -> bool:
        return not self.variances and all(s.verified for s in self.sources)

    def subtotal(self, source: str) -> tuple[Holdings, Holdings, int]:
        lines = [m for m in self.meters if m.source == source]
        return _sum(lines)

    def total(self) -> tuple[Holdings, Holdings, int]:
        return _sum(list(self.meters))


def _sum(lines: Sequence[MeterLine]) -> tuple[Holdings, Holdings, int]:
    opening, closing = Holdings(), Holdings()
    for line in lines:
        opening, closing = opening + line.opening, closing + line.closing
    return opening, closing, sum(line.variance for line in lines)


def plot_step(period: Period) -> timedelta:
    """How long one point of a meter's line covers: a minute, or more on a long period."""
    minutes = (period.end - period.start).total_seconds() / 60
    return timedelta(minutes=max(1, -(-int(minutes) // PLOT_POINTS)))


def bucket_of(period: Period) -> Any:
    """UTC minute text -> (plot point, local hour), as :func:`progressived.report.flows.flows`
    asks."""
    step = plot_step(period)
    zone = period.local(period.start).tzinfo

    def bucket(minute: str) -> tuple[int, datetime]:
        moment = parse_at(minute + ":00+00:00")
        local = moment.astimezone(zone).replace(minute=0, second=0, microsecond=0)
        return int((moment - period.start) // step), local

    return bucket


def _series(period: Period, opening: Holdings, flows: MeterFlows) -> tuple[Any, ...]:
    step = plot_step(period)
    meter, reserve = opening.meter, opening.reserve
    points = [(period.start, meter, reserve)]
    for index in sorted(flows.series):
        moved = flows.series[index]
        meter, reserve = meter + moved[0], reserve + moved[1]
        points.append((min(period.end, period.start + step * (index + 1)), meter, reserve))
    return tuple(points)


def _meter_ids(ledger: LedgerPeriod) -> list[str]:
    found = set(ledger.flows)
    for balances in (ledger.opening, ledger.closing):
        found |= {a.split(":", 1)[1] for a in balances if a.split(":", 1)[0] in HOLDERS}
    found |= {a.split(":", 1)[1] for a in ledger.opening if a.startswith("seed_funding:")}
    found |= {a.split(":", 1)[1] for a in ledger.closing if a.startswith("seed_funding:")}
    return sorted(found)


def _paytable_for(ledger: LedgerPeriod, meter: str, ledgers: Sequence[LedgerPeriod]) -> tuple[
    str | None, str
]:
    """The paytable whose pays a meter makes, and the meter's id in those pays."""
    if ledger.kind == "table":
        return ledger.params_open.get("paytable"), meter
    for table in ledgers:
        if table.kind != "table":
            continue
        for key, value in sorted(table.params_open.items()):
            if key.endswith(".link") and value == ledger.id:
                local = key.split(".")[1]
                if table.params_open.get(f"meters.{local}.link_meter", local) == meter:
                    return table.params_open.get("paytable"), local
    return None, meter


def build(ledgers: Sequence[LedgerPeriod], period: Period, *, created_at: datetime,
          paytables: Path | None = None) -> Report:
    lines: list[MeterLine] = []
    awards: list[Award] = []
    slips_of = {ledger.id: ledger.listed.slips for ledger in ledgers if ledger.kind == "table"}
    for ledger in ledgers:
        for paid in ledger.listed.awards:
            if paid.slip is None and paid.table in slips_of:  # a link's: the table's slip
                key = f"{paid.round}:{paid.seat}:{paid.hand}"
                paid = dataclasses.replace(paid, slip=slips_of[paid.table].get(key))  # noqa: PLW2901
            awards.append(paid)
        for meter in _meter_ids(ledger):
            flows = ledger.flows.get(meter, MeterFlows())
            opening = Holdings.of(ledger.opening, meter)
            hits: dict[str, int] = {}
            for award in ledger.listed.awards:
                if award.meter == meter:
                    hits[award.hand] = hits.get(award.hand, 0) + 1
            count = ledger.wagers.get("*" if ledger.kind == "table" else meter, 0)
            wager = int(ledger.params_open.get("wager_units") or 0)
            paytable, paytable_meter = _paytable_for(ledger, meter, ledgers)
            expected = expectation(
                params=ledger.params_open, meter=meter, paytable=paytable,
                paytable_meter=paytable_meter, wagers=count,
                wagered_units=flows.wagered if ledger.kind == "link" else count * wager,
                hits=hits, folder=paytables,
            )
            lines.append(MeterLine(
                ledger.id, ledger.kind, meter, opening, flows.contributions, count,
                flows.seeds, flows.seed_rows, flows.paid, flows.paid_rows,
                flows.adjustments + flows.transfers, Holdings.of(ledger.closing, meter),
                flows.unexplained, expected, _series(period, opening, flows),
                tuple(sorted(flows.hourly.items())),
            ))
    sources = tuple(
        Source(
            ledger.kind, ledger.id, ledger.location,
            f"{ledger.bounds.head.seq}:{ledger.bounds.head.hash}",
            f"{ledger.bounds.before.seq}:{ledger.bounds.before.hash}",
            f"{ledger.bounds.last.seq}:{ledger.bounds.last.hash}",
            ledger.bounds.rows, ledger.opening_from, ledger.closing_from,
            ledger.verified, tuple(ledger.problems),
        )
        for ledger in ledgers
    )
    notes = [
        f"{ledger.id}: parameters changed in the period (listed); the PAR expectation uses "
        "those in force at its start"
        for ledger in ledgers if ledger.listed.changes
    ]
    return Report(
        period,
        created_at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        sources,
        tuple(lines),
        tuple(sorted(awards, key=lambda a: (parse_at(a.at), a.source, a.seq))),
        tuple((ledger.id, r) for ledger in ledgers for r in ledger.listed.resets),
        tuple((ledger.id, a) for ledger in ledgers for a in ledger.listed.adjustments),
        tuple((ledger.id, c) for ledger in ledgers for c in ledger.listed.changes),
        tuple((ledger.id, meter, table, figures[0], figures[1])
              for ledger in ledgers for (meter, table), figures in sorted(ledger.members.items())),
        tuple(notes),
    )
