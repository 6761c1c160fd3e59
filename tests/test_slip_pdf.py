"""A slip's PDF: one page per copy, opened and its text read back (pypdf)."""

from __future__ import annotations

import importlib
import io
import os
from pathlib import Path

from pypdf import PdfReader

from progressived.cli.ctl import main
from progressived.ledger import Ledger
from progressived.ledger.slip_reads import slips
from progressived.ledger.slips import SlipIssuer
from progressived.printing.pdf import slips_pdf
from tests.conftest import ROOT
from tests.helpers import table
from tests.test_slips import AT, hit_round, play, rules


def ledger_with_slips(tmp_path: Path) -> Path:
    params = table("tcp-sd-1")
    db = tmp_path / "ledger.db"
    with Ledger.open(db, params, at=AT) as ledger:
        ledger.issue_slips(SlipIssuer(rules(), lambda: params))
        play(ledger, params, *hit_round(params))
        ledger.void_slip("T1-000002", reason="wrong seat", by="sup-2", at=AT)
    return db


def test_a_slip_pdf_has_its_original_and_duplicate(tmp_path: Path) -> None:
    db = ledger_with_slips(tmp_path)
    out = tmp_path / "slip.pdf"
    assert main(["slip", "pdf", "T1-000001", "--db", str(db), "--output", str(out)]) == 0
    pages = [p.extract_text() for p in PdfReader(out).pages]
    assert len(pages) == 2
    assert "ORIGINAL" in pages[0] and "DUPLICATE" in pages[1]
    for page in pages:
        assert "T1-000001" in page and "$1,000.00" in page and "AKQ Spades" in page
        assert "ONE THOUSAND AND 00/100 DOLLARS" in page and "Deadwood Grand" in page
    if os.environ.get("PROGRESSIVE_SLIP_PICTURES"):  # docs/slips.md's picture of the PDF
        pdfium = importlib.import_module("pypdfium2")  # the docs' pictures only

        page = pdfium.PdfDocument(str(out))[0]
        page.render(scale=1.5).to_pil().save(ROOT / "docs" / "slips" / "pdf.png")


def test_a_days_slips_in_one_file_with_the_void_marked(tmp_path: Path) -> None:
    db = ledger_with_slips(tmp_path)
    found = slips(db, since="2026-11-21", until="2026-11-21")
    reader = PdfReader(io.BytesIO(slips_pdf((s.slip, s.at, s.hash, s.void) for s in found)))
    assert len(reader.pages) == 2 * len(found) > 2
    void_pages = [p.extract_text() for p in reader.pages[2:4]]
    assert all("*** VOID ***" in p and "wrong seat" in p for p in void_pages)
    assert slips(db, since="2026-11-22") == []


def test_an_unknown_serial_or_unwritable_file(tmp_path: Path) -> None:
    db = ledger_with_slips(tmp_path)
    assert main(["slip", "pdf", "T1-999999", "--db", str(db), "--output", str(tmp_path / "x")]) == 1
    nowhere = tmp_path / "no" / "such" / "dir.pdf"
    assert main(["slip", "pdf", "T1-000001", "--db", str(db), "--output", str(nowhere)]) == 2
