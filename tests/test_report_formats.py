"""The report's figures, HTML, PDF and CSV, made from real ledgers (tests/report_data.py).

The same report gives the same bytes apart from its creation time; the HTML needs nothing
from outside itself; a variance is shown as one, in red and in words, in every format.
"""

from __future__ import annotations

import csv
import re
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from progressived.cli.ctl import main
from progressived.report import csvfiles, html, liability, pdf, period, plots, source, tables
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


def test_figures_html_and_pdf_are_the_same_bytes_apart_from_the_creation_time(
    ledgers: list[Path],
) -> None:
    first = _q4(ledgers, datetime(2026, 12, 1, tzinfo=UTC))
    later = _q4(ledgers, datetime(2026, 12, 2, 8, 30, tzinfo=UTC))
    figures = plots.figures(first)
    assert [f.name for f in figures] == ["meters", "contributions", "reserve", "hits"]
    assert all(f.png.startswith(PNG) for f in figures)
    assert [f.png for f in plots.figures(later)] == [f.png for f in figures]
    page, again = html.render(first, figures), html.render(later, plots.figures(later))
    assert page.replace(first.created_at, "T") == again.replace(later.created_at, "T")
    assert page.count(first.created_at) == 1
    document = pdf.render(first, figures)
    assert document.startswith(b"%PDF-") and document == pdf.render(first, figures)
    assert len(re.findall(rb"/Type /Page\b", document)) >= 2
    assert pdf.render(first, figures, "letter") != document  # another paper size


def test_the_html_is_self_contained_and_says_what_it_was_made_from(ledgers: list[Path]) -> None:
    report = _q4(ledgers, datetime(2026, 12, 1, tzinfo=UTC))
    page = html.render(report, plots.figures(report))
    assert page.count('src="data:image/png;base64,') == 4
    # nothing fetched: no URL, no script, no external style sheet or font
    assert not re.search(r"https?://|<script|<link|@import|url\(", page)
    assert "@page" in page and "Every meter reconciles" in page
    for source_ in report.sources:
        assert source_.closing_row in page and source_.location in page
    assert "the serial of the payout slip journaled with it" in page
    assert all(a.slip and a.slip in page for a in report.awards if a.source == "tcp-07")
    assert "VARIANCE" not in page


def test_a_variance_is_red_and_named_in_the_html_pdf_and_csv(
    ledgers: list[Path], tmp_path: Path
) -> None:
    broken = tmp_path / "tcp-07.db"
    shutil.copy(ledgers[0], broken)
    conn = rd.untriggered(broken)
    conn.execute("UPDATE balances SET units = units - 30000 WHERE account = 'reserve:main'")
    conn.close()
    report = _q4([broken], datetime(2026, 12, 1, tzinfo=UTC))
    assert [(m.meter, m.variance) for m in report.variances] == [("main", 30000)]
    figures = plots.figures(report)
    page = html.render(report, figures)
    assert 'class="verdict bad"' in page
    assert re.search(r'<td class="money fault">VARIANCE<br>\$0\.03</td>', page)
    assert "VARIANCE on table tcp-07 meter main: $0.030000" in page
    assert b"VARIANCE on table tcp-07 meter main" in pdf.render(report, figures)
    written = csvfiles.write(report, tmp_path / "csv")
    assert sorted(p.name for p in written) == sorted(f"{n}.csv" for n in tables.COLUMNS)
    with (tmp_path / "csv" / "liability.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["variance_units"] for r in rows if r["level"] == "meter"] == ["30000"]
    assert rows[-1]["level"] == "total"


def test_cli_writes_every_format(ledgers: list[Path], tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text('[site]\ntime_zone = "America/New_York"\n'
                    'shifts = [{name = "day", start = "06:00"}]\n')
    out = tmp_path / "out"
    status = main(["report", "liability", "--config", str(site), "--day", "2026-10-02",
                   "--db", str(ledgers[0]), "--html", str(tmp_path / "r.html"),
                   "--pdf", str(tmp_path / "r.pdf"), "--paper", "letter", "--csv", str(out),
                   "--json", str(tmp_path / "r.json")])
    assert status == 0
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert (tmp_path / "r.pdf").read_bytes().startswith(b"%PDF-")
    assert (out / "awards.csv").read_text().splitlines()[0].split(",") == list(
        tables.COLUMNS["awards"])
    assert main(["report", "liability", "--day", "2026-10-02", "--db", str(ledgers[0]),
                 "--html", str(tmp_path / "no" / "such" / "dir" / "r.html")]) == 2


def test_a_day_is_drawn_hour_by_hour(ledgers: list[Path]) -> None:
    day = make(ledgers, period.gaming_day(rd.SITE, "2026-10-02"),
               datetime(2026, 12, 1, tzinfo=UTC))
    assert day.meters[0].hourly and all(f.png.startswith(PNG) for f in plots.figures(day))


def test_html_without_the_report_extra_is_one_line_and_exit_8(
    ledgers: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    status = main(["report", "liability", "--day", "2026-10-02", "--db", str(ledgers[0]),
                   "--html", str(tmp_path / "r.html")])
    assert status == 8
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "progressivectl report liability: --html and --pdf need the report extra (matplotlib "
        "is not installed): pip install 'progressived[report]'"]
    assert not (tmp_path / "r.html").exists()
