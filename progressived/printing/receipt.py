"""One payout slip copy drawn on an ESC/POS printer (any python-escpos printer: the network
printer in service, ``Dummy`` to see the bytes).

The text is :func:`progressived.slips.text.lines`, the same as ``slip show`` and the PDF;
the printer adds emphasis (the copy's label and the amount large, VOID inverted), a QR code
of the serial, the amount and the slip row's hash (the printer draws it: ``native``), and a
full cut.
"""

from __future__ import annotations

from escpos.escpos import Escpos

from progressived.slips.slip import Slip, Void
from progressived.slips.text import Copy, lines, qr_text

COLUMNS = 42  # font B on an 80 mm roll (font A: 48 on 80 mm, 32 on 58 mm)


def draw(
    printer: Escpos, slip: Slip, at: str, copy: Copy, row_hash: str, *, void: Void | None = None
) -> None:
    """Send one copy of ``slip`` to ``printer`` (raises what the printer's device raises)."""
    body = lines(slip, at, copy, void=void, width=COLUMNS)
    printer.hw("INIT")
    for line in body:
        stripped = line.strip()
        if stripped in (copy.label, "*** VOID ***") or line.startswith("AMOUNT:"):
            # The lines come centred (or padded) already: emphasis only, no double width.
            printer.set(bold=True, double_height=True, invert=stripped == "*** VOID ***")
            printer.textln(line)
            printer.set_with_default()
        else:
            printer.textln(line)
    printer.ln()
    printer.qr(qr_text(slip, row_hash), native=True, size=4)
    printer.textln(f"row hash {row_hash[:16]}...")
    printer.cut()
