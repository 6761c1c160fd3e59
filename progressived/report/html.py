"""The report as one self-contained HTML file: opens offline, prints on A4 or Letter.

Everything is inside the file: the style sheet inline, the figures as PNG data URIs, no
script, font or image fetched from anywhere. Printed, the page margins fit both papers
(the text block is at most 182 mm wide), table headers repeat on each page, rows and
figures are not split across pages. A variance that is not 0 is red and says so in words
(a black-and-white print still shows it).
"""

from __future__ import annotations

import base64
from html import escape

from progressived.core.money import display_exact
from progressived.report.layout import Picture, Table, cell_text, money_parts, sections
from progressived.report.liability import Report
from progressived.report.plots import Figure
from progressived.report.tables import Tables

STYLE = """
@page { margin: 14mm; }
* { box-sizing: border-box; }
body { font: 10pt/1.35 "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; color: #1b1b1b;
       max-width: 182mm; margin: 0 auto; padding: 8mm 0; }
h1 { font-size: 16pt; margin: 0 0 2mm; }
h2 { font-size: 12pt; margin: 7mm 0 1mm; break-after: avoid; page-break-after: avoid; }
p { margin: 0 0 2mm; }
.meta { color: #444; font-size: 9pt; }
.verdict { padding: 3mm 4mm; border-radius: 2mm; font-weight: bold; margin: 4mm 0; }
.verdict.ok { background: #e6f4ea; border: 1px solid #2e7d32; color: #1b5e20; }
.verdict.bad { background: #fdecea; border: 1px solid #b00020; color: #b00020; }
table { border-collapse: collapse; width: 100%; font-size: 7pt; margin: 1mm 0 2mm; }
thead { display: table-header-group; }
th { text-align: left; border-bottom: 1.2px solid #333; padding: 0.8mm 0.9mm; }
td { border-bottom: 0.5px solid #ccc; padding: 0.6mm 0.9mm; vertical-align: top;
     overflow-wrap: break-word; }
td.lines { font: 6.3pt/1.35 "DejaVu Sans Mono", Menlo, Consolas, monospace;
           overflow-wrap: anywhere; }
td.lines:first-child { font-family: inherit; font-size: 7.5pt; }
tr { break-inside: avoid; page-break-inside: avoid; }
td.money, td.number, th.money, th.number { text-align: right; white-space: nowrap; }
td.money small { color: #888; font-size: 6.5pt; }
tr.sum td { font-weight: bold; background: #f4f4f4; }
td.fault, tr td.fault small { color: #b00020; font-weight: bold; }
figure { margin: 3mm 0; break-inside: avoid; page-break-inside: avoid; }
figure img { width: 100%; height: auto; }
figcaption { font-size: 8pt; color: #444; }
.empty { color: #666; font-style: italic; }
"""


def _cell(value: object, how: str, fault: bool) -> str:
    classes = [how] + (["fault"] if fault else [])
    if how == "money":
        whole, digits = money_parts(value)
        body = escape(whole) + (f"<small>{escape(digits)}</small>" if digits else "")
        if fault:
            body = "VARIANCE<br>" + body
    elif how == "lines":
        body = "<br>".join(escape(line) for line in cell_text(value, how).splitlines())
    else:
        body = escape(cell_text(value, how))
    return f'<td class="{" ".join(classes)}">{body}</td>'


def _table(table: Table) -> str:
    out = [f"<h2>{escape(table.title)}</h2>", f"<p>{escape(table.intro)}</p>"]
    if not table.rows:
        out.append('<p class="empty">none in this period</p>')
        return "\n".join(out)
    head = "".join(
        f'<th class="{how}">{escape(header)}</th>' for _, header, how in table.columns)
    body = []
    for row in table.rows:
        total = row.get("level") in ("table", "link", "total")
        cells = "".join(
            _cell(row.get(key), how, key == table.flagged and bool(row.get(key)))
            for key, _, how in table.columns)
        body.append(f'<tr class="sum">{cells}</tr>' if total else f"<tr>{cells}</tr>")
    out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
    return "\n".join(out)


def _figure(figure: Figure) -> str:
    data = base64.b64encode(figure.png).decode("ascii")
    return (f"<h2>{escape(figure.title)}</h2><figure><img alt=\"{escape(figure.title)}\" "
            f'src="data:image/png;base64,{data}"><figcaption>{escape(figure.caption)}'
            "</figcaption></figure>")


def verdict(report: Report) -> str:
    """The report's verdict in one sentence (the HTML's banner, the PDF's)."""
    if report.ok:
        return ("Every meter reconciles: the variance is 0 to the unit, and verify passed "
                "over the period on every ledger.")
    parts = [f"VARIANCE on {m.kind} {m.source} meter {m.meter}: {display_exact(m.variance)}"
             for m in report.variances]
    parts += [f"verify FAILED over the period on {s.kind} {s.id}"
              for s in report.sources if not s.verified]
    return "; ".join(parts) + "."


def render(report: Report, figures: list[Figure], data: Tables | None = None) -> str:
    p = report.period
    body = [
        "<h1>Progressive liability report</h1>",
        f'<p class="meta">{escape(p.label)}<br>from {escape(p.text(p.start))} to '
        f"{escape(p.text(p.end))} (end excluded)<br>made {escape(report.created_at)} "
        "from the hash-chained ledgers named below</p>",
        f'<div class="verdict {"ok" if report.ok else "bad"}">{escape(verdict(report))}</div>',
    ]
    body += [f'<p class="meta">note: {escape(n)}</p>' for n in report.notes]
    for section in sections(report, figures, data):
        body.append(_figure(section.figure) if isinstance(section, Picture) else _table(section))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Progressive liability: {escape(p.label)}</title>"
        f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
