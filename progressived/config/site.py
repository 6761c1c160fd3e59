"""``[site]``: the casino's time zone and shift boundaries (what the reports' periods mean).

A report is asked for by shift, gaming day or quarter (``progressivectl report liability``,
docs/reports.md); those are the site's local times, not UTC, so the site says which zone
it keeps and where its shifts begin. The section is optional in a table's and a link
controller's file (both loaders validate it, so ``check-config`` catches a bad one); the
report reads it from whichever file it is given.

Shifts are listed in the order they follow each other from the start of the **gaming
day**, which is the first shift's start: ``day 06:00, swing 14:00, graveyard 22:00`` is a
gaming day from 06:00 to 06:00 the next calendar day. A start earlier in the clock than the
one before it falls on the next calendar day (``graveyard 22:00, day 06:00`` is fine);
each shift ends where the next begins, the last where the next gaming day begins.
"""

from __future__ import annotations

import re
from datetime import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, ValidationError, field_validator, model_validator

from progressived.config.table import ConfigError, format_validation_error, read_toml
from progressived.runtime.config_files import StrictModel

MINUTES_PER_DAY = 24 * 60
_HHMM = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")


class Shift(StrictModel):
    """One shift: its name (``--shift DATE/NAME``) and the local time it begins."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
    start: str

    @field_validator("start")
    @classmethod
    def _clock(cls, value: str) -> str:
        if not _HHMM.match(value):
            raise ValueError(f"start {value!r} must be a 24-hour local time HH:MM")
        return value

    @property
    def clock(self) -> time:
        hours, minutes = self.start.split(":")
        return time(int(hours), int(minutes))

    @property
    def minute(self) -> int:
        return self.clock.hour * 60 + self.clock.minute


class SiteSection(StrictModel):
    """The site's IANA time zone and its shifts, first the one that opens the gaming day."""

    time_zone: str = "UTC"
    shifts: tuple[Shift, ...] = (Shift(name="day", start="00:00"),)

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"time_zone {value!r} is not an IANA time zone (e.g. America/New_York)"
            ) from None
        return value

    @model_validator(mode="after")
    def _order(self) -> SiteSection:
        if not self.shifts:
            raise ValueError("shifts: at least one shift is needed")
        names = [s.name for s in self.shifts]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"shifts: shift {name!r} is named twice")
        offsets = self.offsets()
        for before, after, shift in zip(offsets, offsets[1:], self.shifts[1:], strict=False):
            if after <= before:
                raise ValueError(
                    f"shifts: {shift.name} at {shift.start} does not follow the shift before it "
                    "within one gaming day (list the shifts in the order they work, the first "
                    "one opening the gaming day)"
                )
        return self

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)

    def offsets(self) -> list[int]:
        """Each shift's start in minutes after the gaming day's start (the first is 0)."""
        first = self.shifts[0].minute
        return [(s.minute - first) % MINUTES_PER_DAY for s in self.shifts]

    def shift(self, name: str) -> int:
        """The index of the shift called ``name`` (``KeyError`` naming the known ones)."""
        for index, s in enumerate(self.shifts):
            if s.name == name:
                return index
        known = ", ".join(s.name for s in self.shifts)
        raise KeyError(f"no shift {name!r} in [site] shifts (shifts: {known})")


def site_from(data: dict[str, Any], source: str) -> SiteSection:
    """The ``[site]`` section of a parsed file (its defaults when absent)."""
    section = data.get("site", {})
    try:
        return SiteSection.model_validate(section)
    except ValidationError as exc:
        lines = format_validation_error(source, exc, SiteSection).splitlines()
        top = f"{source}: (top level)"
        raise ConfigError(
            *(
                line.replace(top, f"{source}: site", 1)
                if line.startswith(top)
                else line.replace(f"{source}: ", f"{source}: site.", 1)
                for line in lines
            )
        ) from None


def load_site(path: Path) -> SiteSection:
    """``[site]`` of a table's or a link controller's file (only that section is read)."""
    return site_from(read_toml(path), str(path.resolve()))
