"""Every table of a report as plain rows: the one source of the text, JSON, CSV, HTML and PDF.

Money is integer units (1 unit = $0.000001, 1 cent = 10,000 units) in every column whose
name ends in ``_units``; the formats that people read print it as dollars to the unit.
Times are the site's local time with its zone (``2026-11-28 06:00:00 EST``). Rows are in a
fixed order (ledger, meter, then row number), so the same ledgers give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from progressived.par.sheet import decimal_text
from progressived.report.liability import Holdings, MeterLine, Report
from progressived.report.period import parse_at

Row = dict[str, Any]
TITLES = {
    "sources": "What this report was made from",
    "liability": "Liability by meter, table and in total",
    "par": "Contributions against the PAR sheet",
    "hits": "Hit frequency against the PAR sheet",
    "awards": "Awards paid",
    "resets": "Seeds and resets",
    "adjustments": "Operator adjustments and transfers",
    "parameter_changes": "Rate and parameter changes",
    "hourly": "Contributions per hour",
    "link_tables": "Linked meters by member table",
}


def _holdings(prefix: str, h: Holdings) -> Row:
    return {
        f"{prefix}_meter_units": h.meter,
        f"{prefix}_reserve_units": h.reserve,
        f"{prefix}_overflow_units": h.overflow,
        f"{prefix}_pending_units": h.pending,
        f"{prefix}_units": h.total,
    }


def _line(level: str, source: str, meter: str, opening: Holdings, closing: Holdings,
          variance: int, flows: dict[str, int]) -> Row:
    return {
        "level": level, "source": source, "meter": meter, **_holdings("opening", opening),
        **flows, **_holdings("closing", closing), "variance_units": variance,
    }


_FLOWS = ("contributions_units", "contribution_count", "seeds_units", "resets",
          "awards_paid_units", "awards_paid_count", "adjustments_units", "unexplained_units")


def _flows(lines: list[MeterLine]) -> dict[str, int]:
    values = [
        (m.contributions, m.contribution_count, m.seeds, m.resets, m.paid, m.paid_count,
         m.adjustments, m.unexplained)
        for m in lines
    ]
    return {name: sum(v[i] for v in values) for i, name in enumerate(_FLOWS)}


def liability(report: Report) -> list[Row]:
    rows: list[Row] = []
    for m in report.meters:
        rows.append(_line("meter", m.source, m.meter, m.opening, m.closing, m.variance,
                          _flows([m])))
    for source in report.sources:
        lines = [m for m in report.meters if m.source == source.id]
        opening, closing, variance = report.subtotal(source.id)
        label = "link" if source.kind == "link" else "table"
        rows.append(_line(label, source.id, "", opening, closing, variance, _flows(lines)))
    opening, closing, variance = report.total()
    rows.append(_line("total", "", "", opening, closing, variance, _flows(list(report.meters))))
    # a count summed over meters counts a wager once per meter: only the meters' rows say it
    for row in rows[len(report.meters):]:
        row["contribution_count"] = None
    return rows


def _ratio(value: Fraction) -> str:
    return decimal_text(value, 6)


def par(report: Report) -> list[Row]:
    rows = []
    for m in report.meters:
        e = m.expectation
        if e is None:
            continue
        rows.append({
            "source": m.source, "meter": m.meter, "paytable": e.paytable,
            "rate": str(e.rate), "reserve_rate": str(e.reserve_rate),
            "wagers": m.contribution_count, "wagered_units": e.wagered_units,
            "expected_contribution_units": int(e.expected_contribution),
            "actual_contribution_units": m.contributions,
            "difference_units": m.contributions - int(e.expected_contribution),
            "note": e.note,
        })
    return rows


def hits(report: Report) -> list[Row]:
    rows = []
    for m in report.meters:
        if m.expectation is None:
            continue
        for h in m.expectation.hands:
            rows.append({
                "source": m.source, "meter": m.meter, "hand": h.hand,
                "probability": f"{h.probability.numerator}/{h.probability.denominator}"
                if h.probability else None,
                "one_in": _ratio(1 / h.probability) if h.probability else None,
                "expected_hits": _ratio(h.expected_hits) if h.probability else None,
                "actual_hits": h.actual_hits,
                "actual_one_in": _ratio(Fraction(m.contribution_count, h.actual_hits))
                if h.actual_hits else None,
            })
    return rows


def awards(report: Report) -> list[Row]:
    return [
        {
            "source": a.source, "seq": a.seq, "time": report.period.text(parse_at(a.at)),
            "table": a.table, "round": a.round, "seat": a.seat, "hand": a.hand,
            "meter": a.meter, "amount_units": a.units, "confirmed_by": a.confirmed_by,
            "meter_before_units": a.meter_before, "meter_after_units": a.meter_after,
            "slip": a.slip,
        }
        for a in report.awards
    ]


def resets(report: Report) -> list[Row]:
    return [
        {
            "source": source, "seq": r.seq, "time": report.period.text(parse_at(r.at)),
            "meter": r.meter, "seed_units": r.seed_units, "reserve_units": r.reserve_units,
            "why": r.why,
        }
        for source, r in report.resets
    ]


def adjustments(report: Report) -> list[Row]:
    return [
        {
            "source": source, "seq": a.seq, "time": report.period.text(parse_at(a.at)),
            "meter": a.meter, "what": a.what, "amount_units": a.units, "operator": a.operator,
            "approved_by": a.approved_by, "actor": a.actor, "reason": a.reason,
            "meter_before_units": a.meter_before,
        }
        for source, a in report.adjustments
    ]


def parameter_changes(report: Report) -> list[Row]:
    return [
        {
            "source": source, "seq": c.seq, "time": report.period.text(parse_at(c.at)),
            "actor": c.actor, "key": c.key, "old": c.old, "new": c.new, "reason": c.reason,
        }
        for source, c in report.changes
    ]


def hourly(report: Report) -> list[Row]:
    rows = []
    for m in report.meters:
        for hour, units in m.hourly:
            rows.append({
                "hour": f"{hour:%Y-%m-%d %H:00} {hour.tzname()}", "source": m.source,
                "meter": m.meter, "contributed_units": units,
            })
    return rows


def link_tables(report: Report) -> list[Row]:
    """Each linked meter's contributions and awards by member table (what each table gave
    the link and won from it)."""
    rows = []
    for source, meter, table, wagered, contributed in report.members:
        won = [a for a in report.awards if a.source == source and a.meter == meter
               and a.table == table]
        rows.append({
            "source": source, "meter": meter, "table": table, "wagered_units": wagered,
            "contributed_units": contributed, "awards_paid_count": len(won),
            "awards_paid_units": sum(a.units for a in won),
        })
    return rows


def sources(report: Report) -> list[Row]:
    return [
        {
            "kind": s.kind, "id": s.id, "location": s.location, "rows": s.rows,
            "opening_row": s.opening_row, "closing_row": s.closing_row, "head": s.head,
            "opening_from": s.opening_from, "closing_from": s.closing_from,
            "verify": "passed" if s.verified else "FAILED", "problems": "; ".join(s.problems),
        }
        for s in report.sources
    ]


_HOLD = ("meter_units", "reserve_units", "overflow_units", "pending_units", "units")
COLUMNS: dict[str, tuple[str, ...]] = {
    "sources": ("kind", "id", "location", "rows", "opening_row", "closing_row", "head",
                "opening_from", "closing_from", "verify", "problems"),
    "liability": ("level", "source", "meter", *(f"opening_{h}" for h in _HOLD), *_FLOWS,
                  *(f"closing_{h}" for h in _HOLD), "variance_units"),
    "par": ("source", "meter", "paytable", "rate", "reserve_rate", "wagers", "wagered_units",
            "expected_contribution_units", "actual_contribution_units", "difference_units",
            "note"),
    "hits": ("source", "meter", "hand", "probability", "one_in", "expected_hits",
             "actual_hits", "actual_one_in"),
    "awards": ("source", "seq", "time", "table", "round", "seat", "hand", "meter",
               "amount_units", "confirmed_by", "meter_before_units", "meter_after_units",
               "slip"),
    "resets": ("source", "seq", "time", "meter", "seed_units", "reserve_units", "why"),
    "adjustments": ("source", "seq", "time", "meter", "what", "amount_units", "operator",
                    "approved_by", "actor", "reason", "meter_before_units"),
    "parameter_changes": ("source", "seq", "time", "actor", "key", "old", "new", "reason"),
    "hourly": ("hour", "source", "meter", "contributed_units"),
    "link_tables": ("source", "meter", "table", "wagered_units", "contributed_units",
                    "awards_paid_count", "awards_paid_units"),
}

BUILDERS = {
    "sources": sources, "liability": liability, "par": par, "hits": hits, "awards": awards,
    "resets": resets, "adjustments": adjustments, "parameter_changes": parameter_changes,
    "hourly": hourly, "link_tables": link_tables,
}


def tables(report: Report) -> Iterator[tuple[str, list[Row]]]:
    for name, build in BUILDERS.items():
        yield name, build(report)


Tables = dict[str, list[Row]]


def document(report: Report, data: Tables | None = None) -> dict[str, Any]:
    """The whole report, JSON-ready (``--json``): its period, verdict and every table
    (``data``: the tables, when already made)."""
    p = report.period
    return {
        "report": "liability",
        "period": {
            "kind": p.kind, "label": p.label, "time_zone": p.time_zone,
            "start": p.start.isoformat().replace("+00:00", "Z"),
            "end": p.end.isoformat().replace("+00:00", "Z"),
            "start_local": p.text(p.start), "end_local": p.text(p.end),
        },
        "created_at": report.created_at,
        "ok": report.ok,
        "variances": [
            {"source": m.source, "meter": m.meter, "variance_units": m.variance}
            for m in report.variances
        ],
        "notes": list(report.notes),
        "slips": "each award's slip is the payout slip journaled with it (docs/slips.md)",
        "tables": dict(tables(report)) if data is None else data,
    }
