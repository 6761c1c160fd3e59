"""Payout slips in the ledger: one per award, in the award's transaction, in one series."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from progressived.core.money import UNITS_PER_DOLLAR as DOLLAR
from progressived.core.params import TableParams
from progressived.engine import Command, Confirm, KeyHand, Lock, Reconcile, Sensors, decide
from progressived.engine.events import AwardConfirmed, AwardKeyed, AwardReversed
from progressived.ledger import Ledger, LedgerError
from progressived.ledger.slips import SlipIssuer, SlipRefused
from progressived.ledger.verify import verify
from progressived.slips.issue import Series, issue
from progressived.slips.rules import SlipRules
from progressived.slips.slip import Slip, Source
from tests.helpers import fresh, table

AT = "2026-11-21T19:00:00.000000Z"


@pytest.fixture
def params() -> TableParams:
    return table("tcp-sd-1")  # $1 wager, meter seeded at $1,000, AKQ spades 100%


def rules() -> SlipRules:
    return SlipRules(prefix="T1-", property_name="Deadwood Grand", asset="A-1044", location="Pit 2")


def play(ledger: Ledger, params: TableParams, *commands: Command, key: str | None = None) -> None:
    state = ledger.state
    for command in commands:
        decision = decide(params, state, replace(command, at=AT))
        assert decision.accepted, getattr(decision, "reason", "")
        state = decision.state
        ledger.append(decision.events, state, at=AT, actor=command.actor, idempotency_key=key)


def slip_rows(db: Path) -> list[tuple[int, str, str, dict[str, Any]]]:
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT seq, kind, actor, data FROM journal WHERE kind LIKE 'slip_%' ORDER BY seq"
    ).fetchall()
    return [(s, k, a, json.loads(d)) for s, k, a, d in rows]


def hit_round(params: TableParams) -> list[Command]:
    """AKQ spades (100% of the meter) at seat 3, AKQ suited (500 for 1) at seat 5: envy."""
    return [
        Sensors(present=frozenset({1, 3, 5})),
        Lock(),
        KeyHand(seat=3, hand="akq-spades"),
        KeyHand(seat=5, hand="akq-suited"),
        Confirm(actor="supervisor-7"),
        Reconcile(actor="dealer"),
    ]


def test_each_award_gets_a_slip_in_its_transaction(tmp_path: Path, params: TableParams) -> None:
    db = tmp_path / "ledger.db"
    with Ledger.open(db, params, at=AT) as ledger:
        ledger.issue_slips(SlipIssuer(rules(), lambda: params))
        play(ledger, params, *hit_round(params))
    rows = slip_rows(db)
    serials = [data["serial"] for _, _, _, data in rows]
    assert serials == [f"T1-{n:06d}" for n in range(1, len(rows) + 1)]
    by_award = {data["award"]: data for _, _, _, data in rows}
    meter = by_award["1:3:akq-spades"]
    assert meter["source"] == "meter" and meter["units"] == 1000 * DOLLAR
    assert (meter["meter_before_units"], meter["meter_after_units"]) == (
        1000 * DOLLAR,
        1000 * DOLLAR,
    )
    assert meter["percent"] == "1/1" and meter["pay"] == "100% of main"
    assert meter["preparer"] == "supervisor-7" and meter["hand_name"] == "AKQ Spades"
    assert meter["taxable"] is True  # $1,000 >= $600 and >= 300 x $1
    assert meter["signatures"] == ["Preparer"] and meter["asset"] == "A-1044"
    tray = by_award["1:5:akq-suited"]
    assert (tray["source"], tray["units"], tray["taxable"]) == ("tray", 500 * DOLLAR, False)
    assert tray["notation"] == "NON-TAXABLE" and tray["preparer"] == "dealer"
    envy = {a: d["units"] for a, d in by_award.items() if d["source"] == "envy"}
    # seat 1 and 5 envy seat 3's AKQ spades ($100), seats 1 and 3 envy seat 5's ($25)
    assert envy == {
        "1:1:envy:3:akq-spades": 100 * DOLLAR,
        "1:5:envy:3:akq-spades": 100 * DOLLAR,
        "1:1:envy:5:akq-suited": 25 * DOLLAR,
        "1:3:envy:5:akq-suited": 25 * DOLLAR,
    }
    # The slip row follows its award's row: the award_confirmed's is right before it.
    conn = sqlite3.connect(db)
    before = conn.execute("SELECT kind FROM journal WHERE seq = ?", (rows[0][0] - 1,)).fetchone()
    assert before == ("award_confirmed",)
    assert verify(db).ok


def test_a_changed_slip_fails_verify(tmp_path: Path, params: TableParams) -> None:
    db = tmp_path / "ledger.db"
    with Ledger.open(db, params, at=AT) as ledger:
        ledger.issue_slips(SlipIssuer(rules(), lambda: params))
        play(ledger, params, *hit_round(params))
    seq, _, _, data = slip_rows(db)[0]
    data["units"] = 10 * DOLLAR
    conn = sqlite3.connect(db)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    conn.execute("UPDATE journal SET data = ? WHERE seq = ?", (text, seq))
    conn.commit()
    conn.close()
    report = verify(db)
    assert not report.ok
    assert str(seq) in " ".join(str(p) for p in report.problems)


def test_the_series_survives_a_reopen_and_has_no_gap(tmp_path: Path, params: TableParams) -> None:
    db = tmp_path / "ledger.db"
    with Ledger.open(db, params, at=AT) as ledger:
        ledger.issue_slips(SlipIssuer(rules(), lambda: params))
        play(ledger, params, *hit_round(params))
        first = len(slip_rows(db))
    with Ledger.open(db, params, at=AT) as ledger:
        ledger.issue_slips(SlipIssuer(rules(), lambda: params))
        commands = hit_round(params)
        play(ledger, params, *commands[:4])
        # A write the ledger refuses (its state disagrees) consumes no number.
        confirm = decide(params, ledger.state, Confirm(at=AT, actor="supervisor-7"))
        with pytest.raises(LedgerError):
            ledger.append(confirm.events, fresh(params), at=AT)
        play(ledger, params, *commands[4:])
    numbers = [data["number"] for _, _, _, data in slip_rows(db)]
    assert numbers == list(range(1, 2 * first + 1))


def test_a_duplicate_input_issues_no_second_slip(tmp_path: Path, params: TableParams) -> None:
    db = tmp_path / "ledger.db"
    with Ledger.open(db, params, at=AT) as ledger:
        ledger.issue_slips(SlipIssuer(rules(), lambda: params))
        play(ledger, params, *hit_round(params)[:4])
        decision = decide(params, ledger.state, Confirm(at=AT, actor="supervisor-7"))
        for _ in range(2):  # the board resends the press: the same idempotency key
            ledger.append(decision.events, decision.state, at=AT, idempotency_key="frame-9")
    assert [d["award"] for _, _, _, d in slip_rows(db)] == ["1:3:akq-spades"]


def test_an_operator_voids_and_reissues(tmp_path: Path, params: TableParams) -> None:
    db = tmp_path / "ledger.db"
    with Ledger.open(db, params, at=AT) as ledger:
        ledger.issue_slips(SlipIssuer(rules(), lambda: params))
        play(ledger, params, *hit_round(params))
        count = len(slip_rows(db))
        again = ledger.void_slip("T1-000001", reason="printer jam", by="op-3", at=AT, reissue=True)
        assert again is not None and again.serial == f"T1-{count + 1:06d}"
        assert again.reissue_of == "T1-000001" and again.award == "1:3:akq-spades"
        with pytest.raises(SlipRefused, match="already void"):
            ledger.void_slip("T1-000001", reason="again", by="op-3", at=AT)
        with pytest.raises(SlipRefused, match="no slip"):
            ledger.void_slip("T1-999999", reason="typo", by="op-3", at=AT)
        ledger.void_slip("T1-000002", reason="spoiled", by="op-3", at=AT)
    rows = slip_rows(db)
    voids = [(a, d["serial"], d["cause"], d["by"]) for _, k, a, d in rows if k == "slip_voided"]
    assert voids == [
        ("op-3", "T1-000001", "operator", "op-3"),
        ("op-3", "T1-000002", "operator", "op-3"),
    ]
    numbers = [d["number"] for _, k, _, d in rows if k == "slip_issued"]
    assert numbers == list(range(1, count + 2))  # the reissue took the next number
    assert verify(db).ok


def test_signatures_and_notices_grow_with_the_amount(params: TableParams) -> None:
    big = replace(params, wager=5 * DOLLAR)
    state = fresh(big)
    keyed = AwardKeyed(
        at=AT,
        round=1,
        seat=2,
        hand="akq-spades",
        meter="main",
        units=150_000 * DOLLAR,
        meter_before=150_000 * DOLLAR,
        meter_after=1000 * DOLLAR,
        reset_reserve=0,
        reset_seed=0,
        order=0,
    )
    confirmed = AwardConfirmed(
        at=AT, round=1, seat=2, hand="akq-spades", meter="main", units=150_000 * DOLLAR, by="sup"
    )
    entries, series = issue(rules(), big, state, [keyed, confirmed], "dealer", Series(last=41))
    slip = Slip.from_dict(entries[0].data)
    assert (slip.serial, series.last) == ("T1-000042", 42)
    assert slip.signatures == ("Preparer", "Verifier", "Manager")
    assert slip.notices == ("Gaming commission notified before payment",)
    assert (slip.meter_before_units, slip.meter_after_units) == (150_000 * DOLLAR, 1000 * DOLLAR)
    assert slip.wager_units == 5 * DOLLAR and slip.source is Source.METER


def test_the_taxable_rule_needs_both_conditions() -> None:
    r = rules()
    assert r.taxable(600 * DOLLAR, 2 * DOLLAR)  # $600, 300 x $2
    assert not r.taxable(599 * DOLLAR + 990_000, 1 * DOLLAR)  # under $600
    assert not r.taxable(900 * DOLLAR, 5 * DOLLAR)  # under 300 x $5 = $1,500
    assert replace(r, taxable_multiple=0).taxable(900 * DOLLAR, 5 * DOLLAR)


def test_a_reversed_award_voids_its_live_slip(params: TableParams) -> None:
    confirmed = AwardConfirmed(
        at=AT, round=4, seat=2, hand="akq-spades", meter="main", units=1000 * DOLLAR, by="sup"
    )
    entries, series = issue(rules(), params, fresh(params), [confirmed], "sup", Series())
    assert series.live == {"4:2:akq-spades": ("T1-000001", 1)}
    reversed_ = AwardReversed(
        at=AT,
        round=4,
        seat=2,
        hand="akq-spades",
        meter="main",
        units=1000 * DOLLAR,
        meter_before=0,
        meter_after=1000 * DOLLAR,
        reason="voided",
    )
    entries, after = issue(rules(), params, fresh(params), [reversed_], "sup", series)
    assert [(e.kind, e.data["serial"], e.data["cause"]) for e in entries] == [
        ("slip_voided", "T1-000001", "award-reversed")
    ]
    assert after.live == {} and after.last == 1


def test_a_linked_award_names_the_link_that_answered(params: TableParams) -> None:
    """At a linked table the award is confirmed by the link's answer (docs/link.md): its
    slip is the table's, in the table's series, naming the link."""
    linked = replace(params, meters=(replace(params.meters[0], link="link-a"),))
    confirmed = AwardConfirmed(
        at=AT, round=9, seat=4, hand="akq-spades", meter="main", units=25_000 * DOLLAR, by="sup"
    )
    entries, _ = issue(rules(), linked, fresh(params), [confirmed], "link", Series(last=7))
    slip = Slip.from_dict(entries[0].data)
    assert (slip.serial, slip.link, slip.meter, slip.preparer) == ("T1-000008", "link-a", "main", "sup")
    assert slip.signatures == ("Preparer", "Verifier", "Manager") and slip.taxable
