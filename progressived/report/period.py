"""A report's period: a shift, a gaming day, a quarter or two local times, in UTC instants.

Ledger rows carry UTC times; people ask for "yesterday's swing shift" or "the fourth
quarter" in the site's own time (``[site]``, :mod:`progressived.config.site`). A period is
half-open, ``[start, end)``: a row at the very instant a shift ends belongs to the next
shift, so consecutive periods neither share nor lose a row. Local times are resolved
through the zone's rules, so a gaming day across a daylight-saving change lasts 23 or 25
hours, as the wall clock says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from progressived.config.site import SiteSection


class PeriodError(ValueError):
    """A period that cannot be read (bad date, unknown shift, end before start)."""


@dataclass(frozen=True, slots=True)
class Period:
    """``[start, end)`` in UTC, with what it was asked as (``label``) and its zone."""

    kind: str  # shift | day | quarter | range
    label: str
    start: datetime  # aware, UTC
    end: datetime  # aware, UTC
    time_zone: str

    def local(self, instant: datetime) -> datetime:
        return instant.astimezone(ZoneInfo(self.time_zone))  # ZoneInfo keeps one per key

    def text(self, instant: datetime) -> str:
        """A local time as a report prints it: ``2026-11-28 06:00:00 EST``."""
        moment = self.local(instant)
        return f"{moment:%Y-%m-%d %H:%M:%S} {moment.tzname()}"


def _date(text: str, what: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise PeriodError(f"{what}: {text!r} is not a date YYYY-MM-DD") from None


def _at(site: SiteSection, day: date, minutes_after_open: int) -> datetime:
    """The UTC instant ``minutes_after_open`` wall-clock minutes after gaming day ``day``
    opened (the first shift's start), in the site's zone."""
    first = site.shifts[0].clock
    opening = datetime(day.year, day.month, day.day, first.hour, first.minute)
    wall = opening + timedelta(minutes=minutes_after_open)
    return wall.replace(tzinfo=site.zone).astimezone(UTC)


def gaming_day(site: SiteSection, text: str) -> Period:
    day = _date(text, "--day")
    opens = site.shifts[0].start
    return Period(
        "day",
        f"gaming day {day.isoformat()} (from {opens} {site.time_zone})",
        _at(site, day, 0),
        _at(site, day + timedelta(days=1), 0),
        site.time_zone,
    )


def shift(site: SiteSection, text: str) -> Period:
    """``DATE/NAME``: shift NAME of the gaming day that opens on DATE."""
    day_text, sep, name = text.partition("/")
    if not sep or not name:
        raise PeriodError(f"--shift: {text!r} is not DATE/NAME (e.g. 2026-11-28/swing)")
    day = _date(day_text, "--shift")
    try:
        index = site.shift(name)
    except KeyError as exc:
        raise PeriodError(f"--shift: {exc.args[0]}") from None
    offsets = site.offsets()
    start = _at(site, day, offsets[index])
    end = (
        _at(site, day, offsets[index + 1])
        if index + 1 < len(offsets)
        else _at(site, day + timedelta(days=1), 0)
    )
    begins = site.shifts[index].start
    return Period(
        "shift", f"{name} shift of gaming day {day.isoformat()} (from {begins} {site.time_zone})",
        start, end, site.time_zone,
    )


_QUARTER = re.compile(r"^(\d{4})-?[Qq]([1-4])$")


def quarter(site: SiteSection, text: str) -> Period:
    """``YYYY-QN``: the gaming days of that calendar quarter."""
    match = _QUARTER.match(text)
    if match is None:
        raise PeriodError(f"--quarter: {text!r} is not YYYY-QN (e.g. 2026-Q4)")
    year, number = int(match[1]), int(match[2])
    first = date(year, 3 * number - 2, 1)
    after = date(year + 1, 1, 1) if number == 4 else date(year, 3 * number + 1, 1)
    return Period(
        "quarter", f"{year}-Q{number} (gaming days {first.isoformat()} to "
        f"{(after - timedelta(days=1)).isoformat()}, {site.time_zone})",
        _at(site, first, 0), _at(site, after, 0), site.time_zone,
    )


def _instant(site: SiteSection, text: str, what: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise PeriodError(f"{what}: {text!r} is not a time YYYY-MM-DDTHH:MM") from None
    if moment.tzinfo is None:  # the site's wall clock
        moment = moment.replace(tzinfo=site.zone)
    return moment.astimezone(UTC)


def between(site: SiteSection, start: str, end: str) -> Period:
    begin, finish = _instant(site, start, "--from"), _instant(site, end, "--to")
    if finish <= begin:
        raise PeriodError(f"--to {end} is not after --from {start}")
    return Period("range", f"from {start} to {end} ({site.time_zone})", begin, finish,
                  site.time_zone)


def parse_at(text: str) -> datetime:
    """A ledger row's ``at`` (UTC ISO-8601, ``Z``; a table's to the microsecond, a link's to
    the millisecond) as an aware instant."""
    return datetime.fromisoformat(text)
