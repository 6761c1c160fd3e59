"""What the HTML and the PDF show, in which order, with which headings: one layout, two
renderings, so the PDF is the same report as the HTML.

A section is a heading, a sentence saying what it is and why it is there, and either a
table (columns chosen from :mod:`progressived.report.tables`, with headers and how each
cell is shown) or a figure (:mod:`progressived.report.plots`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from progressived.core.money import display_exact
from progressived.report.liability import Report
from progressived.report.plots import Figure
from progressived.report.tables import tables

# (key, header, how): how is "money" (integer units as dollars), "text", "number" or
# "lines" (a list of short lines, e.g. the rows bounding a period: SEQ:HASH each)
Column = tuple[str, str, str]


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    intro: str
    columns: tuple[Column, ...]
    rows: list[dict[str, Any]]
    flagged: str | None = None  # a money column whose non-zero cells are shown as faults


@dataclass(frozen=True)
class Picture:
    figure: Figure


Section = Table | Picture

LIABILITY = (
    ("level", "level", "text"), ("source", "ledger", "text"), ("meter", "meter", "text"),
    ("opening_units", "opening", "money"), ("contributions_units", "contributions", "money"),
    ("seeds_units", "seeds / resets", "money"), ("awards_paid_units", "awards paid", "money"),
    ("adjustments_units", "adjustments", "money"), ("closing_units", "closing", "money"),
    ("variance_units", "variance", "money"),
)
HOLDINGS = (
    ("source", "ledger", "text"), ("meter", "meter", "text"),
    ("contribution_count", "wagers", "number"), ("resets", "resets", "number"),
    ("awards_paid_count", "awards", "number"),
    ("opening_meter_units", "meter", "money"), ("opening_reserve_units", "reserve", "money"),
    ("opening_overflow_units", "overflow", "money"), ("opening_pending_units", "pending", "money"),
    ("closing_meter_units", "meter", "money"), ("closing_reserve_units", "reserve", "money"),
    ("closing_overflow_units", "overflow", "money"), ("closing_pending_units", "pending", "money"),
)


def money_parts(units: Any) -> tuple[str, str]:
    """``$1,234.56`` and the sub-cent digits (``7891``; empty when they are zeros)."""
    if units is None:
        return "", ""
    text = display_exact(int(units))
    whole, digits = text[:-4], text[-4:]
    return whole, "" if digits == "0000" else digits


LIST_LIMIT = 500  # rows of a list printed; all of them are in the CSV and the JSON


def _capped(intro: str, rows: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """A list's first :data:`LIST_LIMIT` rows, the intro saying where the rest are."""
    if len(rows) <= LIST_LIMIT:
        return intro, rows
    return (f"{intro} The first {LIST_LIMIT:,} of {len(rows):,} are printed here; every one "
            "is in the CSV (--csv) and the JSON (--json).", rows[:LIST_LIMIT])


def _by_hand(awards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Awards paid per ledger, meter and hand: how many, in all, the largest."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for a in awards:
        row = out.setdefault((a["source"], a["meter"], a["hand"]), {
            "source": a["source"], "meter": a["meter"], "hand": a["hand"], "count": 0,
            "amount_units": 0, "largest_units": 0})
        row["count"] += 1
        row["amount_units"] += a["amount_units"]
        row["largest_units"] = max(row["largest_units"], a["amount_units"])
    return [out[key] for key in sorted(out)]


def sections(
    report: Report, figures: list[Figure], data: dict[str, list[dict[str, Any]]] | None = None
) -> Iterator[Section]:
    data = dict(tables(report)) if data is None else data
    by_name = {f.name: f for f in figures}
    yield Table("sources", "What this report was made from",
                "Each ledger read; the rows bounding the period (the opening is the state "
                "after the row before it) and the ledger's head when read, as SEQ:HASH; and "
                "verify over the period (the hash chain and each row's postings).",
                (("ledger", "ledger", "lines"), ("rows", "rows", "number"),
                 ("chain", "rows bounding the period, and the head", "lines"),
                 ("verify", "verify", "text")),
                [{"ledger": [f"{s['kind']} {s['id']}", s["location"]], "rows": s["rows"],
                  "chain": [f"before: {s['opening_row']}", f"last: {s['closing_row']}",
                            f"head: {s['head']}"],
                  "verify": s["verify"] + (f": {s['problems']}" if s["problems"] else "")}
                 for s in data["sources"]])
    yield Table("liability", "Liability by meter, table and in total",
                "Opening + contributions + seeds/resets - awards paid + adjustments - closing "
                "= variance, per meter, to the unit. It must be 0.",
                LIABILITY, data["liability"], flagged="variance_units")
    if data["link_tables"]:
        yield Table("link_tables", "Linked meters by member table",
                    "What each member table wagered on a linked meter and contributed to its "
                    "meter and reserve (net of voids), and the awards it won from it.",
                    (("source", "link", "text"), ("meter", "meter", "text"),
                     ("table", "table", "text"), ("wagered_units", "wagered", "money"),
                     ("contributed_units", "contributed", "money"),
                     ("awards_paid_count", "awards", "number"),
                     ("awards_paid_units", "awards paid", "money")),
                    data["link_tables"])
    yield Table("holdings", "Counts, and the liability by account",
                "The wagers contributing, the resets and the awards paid; then the meter, its "
                "reserve, its overflow above a limit and the awards pending the supervisor: "
                "everything owed to players, at the opening and at the closing.",
                HOLDINGS, [r for r in data["liability"] if r["level"] == "meter"])
    if "meters" in by_name:
        yield Picture(by_name["meters"])
    yield Table("awards_by_hand", "Awards paid by hand",
                "How many awards each hand won from each meter in the period, in all and the "
                "largest.",
                (("source", "ledger", "text"), ("meter", "meter", "text"), ("hand", "hand", "text"),
                 ("count", "awards", "number"), ("amount_units", "paid", "money"),
                 ("largest_units", "largest", "money")),
                _by_hand(data["awards"]))
    intro, rows = _capped("Every award paid in the period, with the serial of the payout "
                          "slip journaled with it.", data["awards"])
    yield Table("awards", "Awards paid", intro,
                (("time", "time", "text"), ("table", "table", "text"), ("seat", "seat", "number"),
                 ("hand", "hand", "text"), ("meter", "meter", "text"),
                 ("amount_units", "amount", "money"), ("meter_before_units", "meter before",
                                                       "money"),
                 ("confirmed_by", "confirmed by", "text"), ("seq", "row", "number"),
                 ("slip", "slip", "text")),
                rows)
    intro, rows = _capped("The house's money into a meter: its first funding and each reset "
                          "after a 100% award, with the reserve moved into the meter.",
                          data["resets"])
    yield Table("resets", "Seeds and resets", intro,
                (("time", "time", "text"), ("source", "ledger", "text"), ("meter", "meter", "text"),
                 ("seed_units", "seed", "money"), ("reserve_units", "from the reserve", "money"),
                 ("why", "why", "text")),
                rows)
    yield Table("adjustments", "Operator adjustments and transfers",
                "Every documented correction of a meter: who, who approved it, why, when.",
                (("time", "time", "text"), ("source", "ledger", "text"), ("meter", "meter", "text"),
                 ("what", "what", "text"), ("amount_units", "amount", "money"),
                 ("operator", "operator", "text"), ("approved_by", "approved by", "text"),
                 ("reason", "reason", "text")),
                data["adjustments"])
    yield Table("parameter_changes", "Rate and parameter changes",
                "Every change of a rate, seed, limit or paytable recorded in the period.",
                (("time", "time", "text"), ("source", "ledger", "text"), ("key", "key", "text"),
                 ("old", "old", "text"), ("new", "new", "text"), ("actor", "by", "text"),
                 ("reason", "reason", "text")),
                data["parameter_changes"])
    yield Table("par", "Contributions against the PAR sheet",
                "Wagered x (rate + reserve rate) at the rates in force at the period's start, "
                "beside what the ledger shows contributed.",
                (("source", "ledger", "text"), ("meter", "meter", "text"),
                 ("paytable", "paytable", "text"), ("rate", "rate", "text"),
                 ("reserve_rate", "reserve rate", "text"), ("wagers", "wagers", "number"),
                 ("expected_contribution_units", "expected", "money"),
                 ("actual_contribution_units", "actual", "money"),
                 ("difference_units", "difference", "money")),
                data["par"])
    yield Table("hits", "Hit frequency against the PAR sheet",
                "Wagers x the exact probability of each hand paid from a meter, beside the "
                "hits paid.",
                (("source", "ledger", "text"), ("meter", "meter", "text"), ("hand", "hand", "text"),
                 ("one_in", "PAR: 1 in", "text"), ("expected_hits", "expected hits", "text"),
                 ("actual_hits", "hits paid", "number"), ("actual_one_in", "actual: 1 in", "text")),
                data["hits"])
    for name in ("hits", "contributions", "reserve"):
        if name in by_name:
            yield Picture(by_name[name])


def cell_text(value: Any, how: str) -> str:
    """A cell as plain text (the PDF's and the HTML's, sub-cent digits apart)."""
    if value is None:
        return ""
    if how == "money":
        whole, digits = money_parts(value)
        return whole + digits
    if how == "number":
        return f"{value:,}" if isinstance(value, int) else str(value)
    if how == "lines":
        return "\n".join(value)
    return str(value)
