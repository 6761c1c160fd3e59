"""The report's figures, made from real ledgers (tests/report_data.py): the same report
draws the same bytes, whenever it is made."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from progressived.report import liability, period, plots, source
from progressived.report.liability import Report
from progressived.report.period import Period
from tests import report_data as rd

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("formats")
    return [
        rd.play_table(folder, "tcp-07", rounds=40, seed=9, step=timedelta(minutes=5),
                      start=rd.Q4_OPENS + timedelta(days=1, hours=1)),
        rd.play_link(folder, rd.LINK_CREATED + timedelta(hours=2)),
    ]


def make(paths: list[Path], when: Period, created: datetime) -> Report:
    read = [source.read(p, str(p), when, liability.bucket_of(when)) for p in paths]
    return liability.build(read, when, created_at=created)


def _q4(paths: list[Path], created: datetime) -> Report:
    return make(paths, period.quarter(rd.SITE, "2026-Q4"), created)


def test_the_figures_are_the_same_bytes_whenever_the_report_is_made(
    ledgers: list[Path],
) -> None:
    first = _q4(ledgers, datetime(2026, 12, 1, tzinfo=UTC))
    later = _q4(ledgers, datetime(2026, 12, 2, 8, 30, tzinfo=UTC))
    figures = plots.figures(first)
    assert [f.name for f in figures] == ["meters", "contributions", "reserve", "hits"]
    assert all(f.png.startswith(PNG) for f in figures)
    assert [f.png for f in plots.figures(later)] == [f.png for f in figures]
    # a day is drawn hour by hour, a quarter day by day: both draw
    day = make(ledgers, period.gaming_day(rd.SITE, "2026-10-02"), later.period.start)
    assert all(f.png.startswith(PNG) for f in plots.figures(day))
