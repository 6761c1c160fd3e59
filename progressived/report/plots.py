"""The report's figures, drawn by matplotlib (Agg: no display) as static PNG images.

Four figures, each a PNG the HTML embeds as a data URI and the PDF as an image:

* **meters** — each meter's value over the period, every award paid marked where it was
  won (a table's meter before the award; a link's at the line);
* **contributions** — what the wagers contributed to the meters and reserves, per local
  hour (per gaming day on a period longer than four days), stacked by meter;
* **reserve** — each meter's reserve over the period (it funds the next reset);
* **hits** — the hits of each hand paid from a meter against the PAR sheet's expectation.

Same report, same bytes: the style is fixed here (not read from a user's matplotlibrc),
the PNG carries no software or time stamp, and the data are in the report's own order.
"""

from __future__ import annotations

import bisect
import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from progressived.report.liability import MeterLine, Report
from progressived.report.period import parse_at

DOLLAR = 1_000_000  # units
DPI = 110
WIDTH, HEIGHT = 7.2, 3.0  # inches: the width of an A4 or Letter page's text
COLOURS = ("#1f4e79", "#c55a11", "#2e7d32", "#7b1fa2", "#00838f", "#6d4c41", "#ad1457")
HOURS_FOR_DAILY = 96


@dataclass(frozen=True, slots=True)
class Figure:
    name: str
    title: str
    caption: str
    png: bytes


@contextmanager
def _style() -> Iterator[Any]:
    import matplotlib  # noqa: PLC0415 - only a report with figures needs it

    matplotlib.use("Agg", force=True)
    from matplotlib import pyplot  # noqa: PLC0415

    settings: dict[str, Any] = {
        "font.family": "DejaVu Sans", "font.size": 8, "axes.titlesize": 9,
        "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
        "grid.color": "#dddddd", "grid.linewidth": 0.6, "legend.fontsize": 7,
        "legend.frameon": False, "svg.hashsalt": "progressived", "path.simplify": True,
    }
    with matplotlib.rc_context():
        matplotlib.rcdefaults()  # not a user's matplotlibrc: the same figure everywhere
        params: Any = matplotlib.rcParams
        params.update(settings)
        yield pyplot


def _png(pyplot: Any, fig: Any) -> bytes:
    out = io.BytesIO()
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=DPI, metadata={"Software": None})
    pyplot.close(fig)
    return out.getvalue()


def _label(m: MeterLine) -> str:
    return f"{m.source} {m.meter}"


def _local(report: Report, moment: datetime) -> datetime:
    return report.period.local(moment).replace(tzinfo=None)


def _time_axis(report: Report, ax: Any) -> None:
    from matplotlib import dates  # noqa: PLC0415

    locator = dates.AutoDateLocator(minticks=3, maxticks=8)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(dates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    ax.set_xlim(_local(report, report.period.start), _local(report, report.period.end))
    ax.set_xlabel(f"local time ({report.period.time_zone})")


def meters(report: Report) -> Figure:
    with _style() as pyplot:
        fig, ax = pyplot.subplots(figsize=(WIDTH, HEIGHT))
        for index, m in enumerate(report.meters):
            colour = COLOURS[index % len(COLOURS)]
            xs = [_local(report, t) for t, _, _ in m.series]
            ys = [value / DOLLAR for _, value, _ in m.series]
            ax.step(xs, ys, where="post", color=colour, linewidth=1.1, label=_label(m))
            won = [a for a in report.awards if a.source == m.source and a.meter == m.meter]
            times = [parse_at(a.at) for a in won]
            moments = [moment for moment, _, _ in m.series]
            values = [a.meter_before if a.meter_before is not None else _value_at(m, moments, at)
                      for a, at in zip(won, times, strict=True)]
            if won:  # one call for all of a meter's markers (a quarter may pay thousands)
                ax.plot([_local(report, at) for at in times], [v / DOLLAR for v in values],
                        marker="v", color=colour, markersize=6, markeredgecolor="black",
                        markeredgewidth=0.5, linestyle="none")
        ax.set_ylabel("meter ($)")
        ax.set_title("Meter value over the period; ▼ an award paid (the meter before it)")
        _time_axis(report, ax)
        if report.meters:
            ax.legend(loc="upper left")
        png = _png(pyplot, fig)
    return Figure("meters", "Meter value over the period",
                  "Each meter's value from the period's start to its end, from the ledger's "
                  "rows; each marker is an award paid, at the meter's value before it.", png)


def _value_at(m: MeterLine, moments: list[datetime], at: datetime) -> int:
    """The meter's line at ``at`` (the last point at or before it; ``moments``: its times)."""
    if not m.series:
        return 0
    return m.series[max(bisect.bisect_right(moments, at) - 1, 0)][1]


def contributions(report: Report) -> Figure:
    hours = (report.period.end - report.period.start).total_seconds() / 3600
    daily = hours > HOURS_FOR_DAILY
    with _style() as pyplot:
        fig, ax = pyplot.subplots(figsize=(WIDTH, HEIGHT))
        keys: list[datetime] = sorted({
            _bucket(hour, daily) for m in report.meters for hour, _ in m.hourly})
        base = dict.fromkeys(keys, 0.0)
        width = 0.8 if daily else 0.8 / 24
        for index, m in enumerate(report.meters):
            values = dict.fromkeys(keys, 0.0)
            for hour, units in m.hourly:
                values[_bucket(hour, daily)] += units / DOLLAR
            if not any(values.values()):
                continue
            ax.bar(keys, [values[k] for k in keys], width=width, align="edge",
                   bottom=[base[k] for k in keys], color=COLOURS[index % len(COLOURS)],
                   label=_label(m))
            for k in keys:
                base[k] += values[k]
        per = "gaming day (local date of its hours)" if daily else "local hour"
        ax.set_ylabel("contributed ($)")
        ax.set_title(f"Contributions to meters and reserves per {per}")
        _time_axis(report, ax)
        if keys:
            ax.legend(loc="upper left")
        png = _png(pyplot, fig)
    return Figure("contributions", f"Contributions per {per}",
                  "The meters' and reserves' share of the wagers, net of voids, stacked by "
                  "meter.", png)


def _bucket(hour: datetime, daily: bool) -> datetime:
    local = hour.replace(tzinfo=None)
    return local.replace(hour=0) if daily else local


def reserve(report: Report) -> Figure:
    with _style() as pyplot:
        fig, ax = pyplot.subplots(figsize=(WIDTH, HEIGHT * 0.8))
        for index, m in enumerate(report.meters):
            xs = [_local(report, t) for t, _, _ in m.series]
            ys = [value / DOLLAR for _, _, value in m.series]
            ax.step(xs, ys, where="post", color=COLOURS[index % len(COLOURS)], linewidth=1.1,
                    label=_label(m))
        ax.set_ylabel("reserve ($)")
        ax.set_title("Reserve over the period (it funds the next reset)")
        _time_axis(report, ax)
        if report.meters:
            ax.legend(loc="upper left")
        png = _png(pyplot, fig)
    return Figure("reserve", "Reserve over the period",
                  "Each meter's reserve: it grows with the wagers and moves into the meter at "
                  "a reset after a 100% award.", png)


def hits(report: Report) -> Figure:
    rows = [(m, h) for m in report.meters if m.expectation for h in m.expectation.hands]
    with _style() as pyplot:
        fig, ax = pyplot.subplots(figsize=(WIDTH, HEIGHT * 0.9))
        names = [f"{m.source} {m.meter}\n{h.hand}" for m, h in rows]
        spots = list(range(len(rows)))
        ax.bar([s - 0.2 for s in spots], [h.actual_hits for _, h in rows], width=0.4,
               color=COLOURS[0], label="hits paid")
        ax.bar([s + 0.2 for s in spots], [float(h.expected_hits) for _, h in rows], width=0.4,
               color=COLOURS[1], label="expected (PAR sheet: wagers x P(hand))")
        ax.set_xticks(spots, names)
        ax.set_ylabel("hits")
        ax.set_title("Awards by hand against the PAR sheet's expectation")
        ax.legend(loc="upper right")
        png = _png(pyplot, fig)
    return Figure("hits", "Awards by hand against the PAR sheet",
                  "Hits of each hand paid from a meter in the period, beside the number the "
                  "PAR sheet's exact probability expects for the period's wagers.", png)


def figures(report: Report) -> list[Figure]:
    """Every figure of the report, in the order the HTML and the PDF show them."""
    return [meters(report), contributions(report), reserve(report), hits(report)]
