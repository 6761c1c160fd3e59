"""A linked table's slips against the link's ledger: each linked slip is a claim the link
paid, of its amount; each claim the link paid the table has a live slip."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from progressived.cli.ctl import main
from progressived.engine.events import AwardConfirmed
from progressived.ledger.slip_reads import StoredSlip
from progressived.link.core.messages import Claim, ClaimConfirm
from progressived.link.store.reports import hits
from progressived.link.store.slip_check import linked_differences
from progressived.slips.issue import Series, issue
from progressived.slips.slip import Slip
from tests.helpers import fresh, table
from tests.link_rig import Rig
from tests.link_sim import METER
from tests.test_slips import rules


def paid_claim(tmp_path: Path) -> tuple[Path, int, str]:
    """A link ledger where table t2's claim r1-s2-3 (seat 2, round 1) was paid."""
    rig = Rig(tmp_path)
    t2 = rig.sites["t2"]
    rig.deliver([t2.contribute(5)])
    rig.deliver([t2.send(Claim, claim="r1-s2-3", round=1, seat=2, hand="royal-flush", meter=METER)])
    rig.deliver([t2.send(ClaimConfirm, claim="r1-s2-3", by="sup")])
    link = rig.link_path
    rig.close()
    (claim,) = [c for c in hits(link) if c["table_id"] == "t2"]
    assert claim["state"] == "paid"
    return link, int(claim["units"]), rig.params.link_id


def linked_slip(units: int, link: str, *, seat: int = 2) -> StoredSlip:
    params = table()
    params = replace(params, table_id="t2", meters=(replace(params.meters[0], link=link),))
    confirmed = AwardConfirmed(
        at="2026-11-23T17:00:01Z", round=1, seat=seat, hand="royal-flush", meter="main",
        units=units, by="sup",
    )  # fmt: skip
    (entry,), _ = issue(rules(), params, fresh(params), [confirmed], "link", Series())
    return StoredSlip(Slip.from_dict(entry.data), 99, "2026-11-23T17:00:01Z", "0" * 64)


def test_a_linked_slip_is_a_claim_the_link_paid(tmp_path: Path) -> None:
    link, units, link_id = paid_claim(tmp_path)
    assert linked_differences([linked_slip(units, link_id)], link, "t2") == (1, [])
    _, wrong = linked_differences([linked_slip(units + 10_000, link_id)], link, "t2")
    assert len(wrong) == 1 and "the link paid" in wrong[0]
    _, stray = linked_differences([linked_slip(units, link_id, seat=5)], link, "t2")
    assert any("the link paid no such claim" in d for d in stray)
    assert any("link claim r1-s2-3" in d and "no live slip" in d for d in stray)
    assert linked_differences([], link, "t1") == (0, [])  # the other table's claims: none


def test_reconcile_takes_the_links_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    link, _, _ = paid_claim(tmp_path)
    table_db = tmp_path / "t2.db"  # the rig's table ledger: its link rows, no slip
    assert main(["slips", "reconcile", "--db", str(table_db), "--link-db", str(link)]) == 1
    out = capsys.readouterr().out
    assert "link claim r1-s2-3" in out and "has no live slip at the table" in out
    assert main(["slips", "reconcile", "--db", str(table_db), "--link-db", str(table_db)]) == 2
    assert "not a link's ledger" in capsys.readouterr().err
