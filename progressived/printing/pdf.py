"""Payout slips as a PDF for the cage and accounting (reportlab): one page per copy, drawn
from the same stored record and the same lines as the printed slip (:mod:`progressived.slips.
text`), with the slip's QR code, so the PDF and the receipt say the same thing.

A slip gives two pages (ORIGINAL, DUPLICATE); a VOID slip is drawn with its VOID; a day's
slips go into one file, in serial order.
"""

from __future__ import annotations

import io
from collections.abc import Iterable

from reportlab.graphics import renderPDF
from reportlab.graphics.barcode.qr import QrCodeWidget
from reportlab.graphics.shapes import Drawing
from reportlab.lib.pagesizes import A5
from reportlab.lib.units import mm
from reportlab.pdfgen.canvas import Canvas

from progressived.slips.slip import Slip, Void
from progressived.slips.text import DUPLICATE, ORIGINAL, Copy, lines, qr_text

FONT, SIZE, LEADING = "Courier", 8.5, 10.5
QR_SIDE = 28 * mm


def slips_pdf(
    slips: Iterable[tuple[Slip, str, str, Void | None]],
    *,
    copies: tuple[Copy, ...] = (ORIGINAL, DUPLICATE),
    title: str = "Payout slips",
) -> bytes:
    """The PDF of ``slips`` (each ``(slip, at, row_hash, void)``): one page per copy."""
    out = io.BytesIO()
    canvas = Canvas(out, pagesize=A5, invariant=True)  # invariant: the same bytes each time
    canvas.setTitle(title)
    canvas.setAuthor("progressived")
    pages = 0
    for slip, at, row_hash, void in slips:
        for copy in copies:
            _page(canvas, slip, at, row_hash, copy, void)
            pages += 1
    if not pages:
        canvas.setFont(FONT, SIZE)
        canvas.drawString(15 * mm, A5[1] - 20 * mm, "No payout slips in this period.")
        canvas.showPage()
    canvas.save()
    return out.getvalue()


def _page(
    canvas: Canvas, slip: Slip, at: str, row_hash: str, copy: Copy, void: Void | None
) -> None:
    width, height = A5
    y = height - 15 * mm
    canvas.setFont(FONT, SIZE)
    for line in lines(slip, at, copy, void=void, width=60):
        bold = line.strip() in (copy.label, "*** VOID ***") or line.startswith("AMOUNT:")
        canvas.setFont("Courier-Bold" if bold else FONT, SIZE)
        canvas.drawString(12 * mm, y, line)
        y -= LEADING
    widget = QrCodeWidget(qr_text(slip, row_hash))
    x0, y0, x1, y1 = widget.getBounds()
    drawing = Drawing(
        QR_SIDE, QR_SIDE, transform=[QR_SIDE / (x1 - x0), 0, 0, QR_SIDE / (y1 - y0), 0, 0]
    )
    drawing.add(widget)
    renderPDF.draw(drawing, canvas, width - QR_SIDE - 12 * mm, 12 * mm)
    canvas.setFont(FONT, 6)
    canvas.drawString(12 * mm, 8 * mm, f"ledger row hash {row_hash}")
    canvas.showPage()
