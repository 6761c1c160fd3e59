"""The report as text on a terminal: the verdict first, then the liability, then the lists.

A non-zero variance is named on its own line and, on a terminal, drawn in red (ANSI); in a
pipe or a file the words alone say it.
"""

from __future__ import annotations

from typing import Any

from progressived.core.money import display_exact
from progressived.report.liability import Report
from progressived.report.tables import Tables, tables

RED, BOLD, RESET = "\033[31;1m", "\033[1m", "\033[0m"


def money(units: Any) -> str:
    return "" if units is None else display_exact(int(units))


def render(report: Report, *, colour: bool = False, data: Tables | None = None) -> str:
    def red(text: str) -> str:
        return f"{RED}{text}{RESET}" if colour else text

    data = dict(tables(report)) if data is None else data
    p = report.period
    out = [
        f"Progressive liability report: {p.label}",
        f"period {p.text(p.start)} to {p.text(p.end)} (end excluded); made {report.created_at}",
    ]
    for s in data["sources"]:
        verdict = "verify passed over the period" if s["verify"] == "passed" else red(
            "verify FAILED over the period: " + s["problems"])
        out.append(
            f"  {s['kind']} {s['id']} from {s['location']}: {s['rows']} rows after row "
            f"{s['opening_row']}, closing row "
            f"{s['closing_row']}, head {s['head']}; {verdict}"
        )
    out.append("")
    head = (f"{'level':<6} {'ledger':<12} {'meter':<8} {'opening':>20} {'contributions':>20} "
            f"{'seeds/resets':>18} {'awards paid':>20} {'adjustments':>16} {'closing':>20} "
            f"{'variance':>12}")
    out.append(head)
    for row in data["liability"]:
        line = (
            f"{row['level']:<6} {row['source']:<12} {row['meter']:<8} "
            f"{money(row['opening_units']):>20} {money(row['contributions_units']):>20} "
            f"{money(row['seeds_units']):>18} {money(row['awards_paid_units']):>20} "
            f"{money(row['adjustments_units']):>16} {money(row['closing_units']):>20} "
            f"{money(row['variance_units']):>12}"
        )
        out.append(red(line) if row["variance_units"] else line)
    out.append("")
    for m in report.variances:
        out.append(red(f"VARIANCE: {m.kind} {m.source} meter {m.meter} is off by "
                       f"{display_exact(m.variance)} ({m.variance} units)"))
    if report.ok:
        out.append("every meter reconciles: variance 0 to the unit; verify passed over the period")
    out.append("")
    out.append(f"awards paid ({len(data['awards'])}, each with its payout slip):")
    for a in data["awards"]:
        out.append(f"  {a['time']}  {a['table']:<10} seat {a['seat']:<2} {a['hand']:<18} "
                   f"meter {a['meter']:<6} {money(a['amount_units']):>18}  by {a['confirmed_by']}"
                   f"  slip {a['slip'] or '-'}")
    out.append(f"operator adjustments ({len(data['adjustments'])}):")
    for a in data["adjustments"]:
        out.append(f"  {a['time']}  {a['source']} meter {a['meter']} {a['what']} "
                   f"{money(a['amount_units'])} by {a['operator']} approved by "
                   f"{a['approved_by']}: {a['reason']}")
    out.append(f"parameter changes ({len(data['parameter_changes'])}):")
    for c in data["parameter_changes"]:
        out.append(f"  {c['time']}  {c['source']} {c['key']}: {c['old']} -> {c['new']} "
                   f"({c['actor']}{': ' + c['reason'] if c['reason'] else ''})")
    out.append("PAR sheet against actual:")
    for r in data["par"]:
        out.append(f"  {r['source']} meter {r['meter']} ({r['paytable']}): {r['wagers']} wagers, "
                   f"expected contribution {money(r['expected_contribution_units'])}, actual "
                   f"{money(r['actual_contribution_units'])}")
    for h in data["hits"]:
        expected = "n/a" if h["expected_hits"] is None else h["expected_hits"]
        out.append(f"    {h['source']} {h['meter']} {h['hand']:<20} expected {expected:>14} "
                   f"hits (1 in {h['one_in'] or 'n/a'}), actual {h['actual_hits']}")
    out.extend(f"note: {n}" for n in report.notes)
    return "\n".join(out)
