"""The report as a PDF, drawn by reportlab: the same sections as the HTML, in landscape
A4 or Letter (a liability table has thirteen columns).

``invariant`` mode leaves out reportlab's own creation date and random document id, so the
same report gives the same bytes apart from the creation time the first page prints; the
pages' text is not compressed (a reader, or ``grep``, finds a variance in it). The
standard Helvetica is used (no font file embedded); table headers repeat on each page.
"""

from __future__ import annotations

import io
from html import escape
from typing import Any

from progressived.report.html import verdict
from progressived.report.layout import Picture, Table, cell_text, sections
from progressived.report.liability import Report
from progressived.report.plots import Figure
from progressived.report.tables import Tables

PAPERS = ("A4", "letter")
RED = "#b00020"
WIDTHS = {"money": 1.6, "number": 0.9, "text": 1.4, "lines": 4.0}


def render(
    report: Report, figures: list[Figure], paper: str = "A4", data: Tables | None = None
) -> bytes:
    from reportlab.lib import colors, pagesizes  # noqa: PLC0415 - the report extra
    from reportlab.lib.styles import getSampleStyleSheet  # noqa: PLC0415
    from reportlab.lib.units import mm  # noqa: PLC0415
    from reportlab.platypus import (  # noqa: PLC0415
        Image,
        KeepTogether,
        Paragraph,
        SimpleDocTemplate,
        Spacer,
        TableStyle,
    )
    from reportlab.platypus import Table as Grid  # noqa: PLC0415

    size = pagesizes.landscape(pagesizes.A4 if paper == "A4" else pagesizes.letter)
    out = io.BytesIO()
    p = report.period
    doc = SimpleDocTemplate(out, pagesize=size, leftMargin=12 * mm, rightMargin=12 * mm,
                            topMargin=12 * mm, bottomMargin=12 * mm, invariant=1,
                            pageCompression=0,
                            title=f"Progressive liability: {p.label}", author="progressived",
                            creator="progressived", producer="progressived")
    styles = getSampleStyleSheet()
    small = styles["BodyText"].clone("small", fontSize=7, leading=8.5)
    right = small.clone("right", alignment=2)
    story: list[Any] = [
        Paragraph("Progressive liability report", styles["Title"]),
        Paragraph(escape(f"{p.label}; from {p.text(p.start)} to {p.text(p.end)} (end "
                         f"excluded); made {report.created_at} from the hash-chained ledgers "
                         "named below"), styles["BodyText"]),
        Paragraph(f'<font color="{"#1b5e20" if report.ok else RED}"><b>'
                  f"{escape(verdict(report))}</b></font>", styles["BodyText"]),
    ]
    story += [Paragraph(escape(f"note: {n}"), small) for n in report.notes]

    def grid(table: Table) -> list[Any]:
        head = [Paragraph(f"<b>{escape(h)}</b>", right if how in ("money", "number") else small)
                for _, h, how in table.columns]
        rows: list[list[Any]] = [head]
        faults: list[tuple[int, int]] = []
        for r, row in enumerate(table.rows, start=1):
            line = []
            for c, (key, _, how) in enumerate(table.columns):
                text = "<br/>".join(escape(t) for t in cell_text(row.get(key), how).split("\n"))
                if key == table.flagged and row.get(key):
                    faults.append((c, r))
                    text = f'<font color="{RED}"><b>VARIANCE {text}</b></font>'
                line.append(Paragraph(text, right if how in ("money", "number") else small))
            rows.append(line)
        weights = [WIDTHS[how] for _, _, how in table.columns]
        widths = [doc.width * w / sum(weights) for w in weights]
        style: list[Any] = [("LINEBELOW", (0, 0), (-1, 0), 0.8, colors.black),
                 ("LINEBELOW", (0, 1), (-1, -1), 0.25, colors.lightgrey),
                 ("VALIGN", (0, 0), (-1, -1), "TOP"),
                 ("TOPPADDING", (0, 0), (-1, -1), 1), ("BOTTOMPADDING", (0, 0), (-1, -1), 1)]
        for r, row in enumerate(table.rows, start=1):
            if row.get("level") in ("table", "link", "total"):
                style.append(("BACKGROUND", (0, r), (-1, r), colors.HexColor("#f0f0f0")))
        for c, r in faults:
            style.append(("BACKGROUND", (c, r), (c, r), colors.HexColor("#fdecea")))
        return [Grid(rows, colWidths=widths, repeatRows=1, style=TableStyle(style))]

    for section in sections(report, figures, data):
        if isinstance(section, Picture):
            f = section.figure
            image = Image(io.BytesIO(f.png))
            scale = min(doc.width * 0.8 / image.imageWidth, doc.height * 0.6 / image.imageHeight)
            image.drawWidth, image.drawHeight = image.imageWidth * scale, image.imageHeight * scale
            story.append(KeepTogether([Paragraph(escape(f.title), styles["Heading2"]), image,
                                       Paragraph(escape(f.caption), small)]))
            continue
        story.append(Paragraph(escape(section.title), styles["Heading2"]))
        story.append(Paragraph(escape(section.intro), small))
        story.append(Spacer(1, 1.5 * mm))
        if section.rows:
            story += grid(section)
        else:
            story.append(Paragraph("<i>none in this period</i>", small))
    doc.build(story)
    return out.getvalue()
