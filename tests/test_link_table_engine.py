"""A linked meter behind the meter port, without I/O: the linked port, the table's link
outbox (messages out, results in), link-down, snapshots and the ledger (real SQLite)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

from progressived.core.params import MeterParams, TableParams
from progressived.daemon.link_out import LinkOutbox
from progressived.engine import Accepted, Decision, KeyHand, Lock, Reconcile, Sensors, decide
from progressived.engine.commands import Confirm, SetClosed
from progressived.engine.events import AwardConfirmed, AwardKeyed, WagerLocked
from progressived.engine.meter_port import ClaimRefused, MeterRequested, ReserveAwards
from progressived.engine.meterbook.linked_port import LINKED_PORT
from progressived.engine.state import LINK_DOWN, TableState
from progressived.ledger import Ledger
from progressived.ledger.snapshot import dumps, loads
from progressived.link.core import messages as lm
from progressived.link.store.audit import verify
from tests.helpers import table

HASH = "ab" * 32


def linked(local: bool = True) -> TableParams:
    base = table("pmg-01", rate="0.15", reserve_rate="0.02")
    meters = (MeterParams(id="main", link="link-a"),)
    if local:
        meters += (replace(base.meters[0], id="side", rate=base.meters[0].rate / 15),)
    return replace(base, table_id="t-1", meters=meters)


def ok(decision: Decision) -> Accepted:
    assert isinstance(decision, Accepted), decision
    return decision


def result(msg: dict[str, object], status: str = "applied", units: int = 0, state: str = "pending"):  # type: ignore[no-untyped-def]
    awards = ()
    if "claim" in msg:
        awards = (
            lm.Award(claim=str(msg["claim"]), meter="main", hand="royal-flush", units=units,
                     order=7, share_of=1, state=state),
        )  # fmt: skip
    return lm.Result(
        link="link-a", table="t-1", seq=int(msg["seq"]), id=str(msg["id"]), status=status,
        code="ok" if status == "applied" else "unknown-claim", reason="", resend_from=0, lseq=9,
        head=lm.LedgerHead(seq=3, hash=HASH), awards=awards,
    )  # fmt: skip


def test_a_linked_table_plays_a_claim_through_the_link_outbox(tmp_path: Path) -> None:
    params = linked()
    ledger = Ledger.open(tmp_path / "l.db", params, at="2026-01-01T00:00:00Z")
    state = ledger.state
    assert "meter:main" not in state.balances  # the link funds the linked meter
    linkbook = LinkOutbox(params, "link-a", "progressive")
    sent: list[dict[str, object]] = []

    def play(command: object, actor: str = "dealer") -> TableState:
        nonlocal state
        decision = ok(decide(params, state, command, LINKED_PORT))
        out = linkbook.outgoing(state, decision.state, decision.events, actor, "t", (1, HASH))
        linkbook.committed(out)
        sent.extend(dict(r.detail["message"]) for r in out.records)
        ledger.append(decision.events, decision.state, at="2026-01-01T00:00:01Z")
        state = decision.state
        return state

    play(Sensors(present=frozenset({1, 3})))
    play(Lock())
    (contribution,) = sent
    assert contribution["type"] == "contribution" and contribution["seq"] == 1
    assert contribution["wagers"] == [{"meter": "main", "count": 2, "units": 2_000_000}]
    # the wager fed the local meter only
    assert state.balance("meter:side") > 0 and "meter:main" not in state.balances
    play(KeyHand(seat=3, hand="royal-flush"))
    claim = sent[-1]
    assert claim["type"] == "claim" and claim["seat"] == 3 and claim["claim"] == "r1-s3-2"
    assert state.claims_awaiting_meter == ((3, "royal-flush"),)
    # a snapshot keeps the awaiting claim (a table killed now recovers it)
    assert loads(dumps(state)) == state
    answer = linkbook.answer(state, claim, result(claim, units=1_234_560_000), "t")
    assert answer is not None
    (keyed,) = answer.events
    assert isinstance(keyed, AwardKeyed) and keyed.units == 1_234_560_000 and keyed.postings == ()
    state = ok(decide(params, state, answer, LINKED_PORT)).state
    ledger.append(answer.events, state, at="2026-01-01T00:00:02Z")
    play(Confirm(), actor="sup 1")
    confirm = sent[-1]
    assert confirm["type"] == "claim_confirm" and confirm["by"] == "sup-1"
    paid = linkbook.answer(state, confirm, result(confirm, units=1_234_570_000, state="paid"), "t")
    assert paid is not None and isinstance(paid.events[0], AwardConfirmed)
    assert paid.events[0].units == 1_234_570_000  # the confirm's result is what is paid
    state = ok(decide(params, state, paid, LINKED_PORT)).state
    ledger.append(paid.events, state, at="2026-01-01T00:00:03Z")
    play(Reconcile())
    ledger.close()
    report = verify(tmp_path / "l.db", replay=True)
    assert report.ok, report.problems


def test_a_refused_claim_leaves_the_round_without_it_and_a_refused_confirm_pays_nothing() -> None:
    params = linked()
    state = TableState()
    for command in (Sensors(present=frozenset({2})), Lock(), KeyHand(seat=2, hand="royal-flush")):
        state = ok(decide(params, state, command, LINKED_PORT)).state
    (request,) = state.awaiting
    assert isinstance(request, ReserveAwards)
    refused = ClaimRefused(at="t", round=1, seat=2, hand="royal-flush", meter="main",
                           code="unknown-hand", reason="no")  # fmt: skip
    from progressived.engine.meter_port import MeterAnswered

    after = ok(decide(params, state, MeterAnswered(events=(refused,)), LINKED_PORT)).state
    assert after.awaiting == () and after.awards == () and after.winner_seats() == frozenset()
    # the dealer may key the hand again (a new claim), or reconcile without it
    assert ok(decide(params, after, Reconcile(), LINKED_PORT)).events


def test_link_down_closes_the_linked_meter_only() -> None:
    mixed = linked()
    state = ok(decide(mixed, TableState(), SetClosed(reason=LINK_DOWN, closed=True))).state
    state = ok(decide(mixed, state, Sensors(present=frozenset({1})))).state
    locked = ok(decide(mixed, state, Lock(), LINKED_PORT))
    assert locked.state.linked_off
    assert any(isinstance(e, WagerLocked) for e in locked.events)
    out = LinkOutbox(mixed, "link-a", "progressive").outgoing(
        state, locked.state, locked.events, "dealer", "t", (1, HASH)
    )
    assert out.records == []  # no contribution for a round locked while the link was down
    refused = decide(mixed, locked.state, KeyHand(seat=1, hand="royal-flush"), LINKED_PORT)
    assert not refused.accepted and refused.code == "link-closed"
    only_linked = linked(local=False)
    state = ok(decide(only_linked, TableState(), SetClosed(reason=LINK_DOWN, closed=True))).state
    state = ok(decide(only_linked, state, Sensors(present=frozenset({1})))).state
    refused = decide(only_linked, state, Lock(), LINKED_PORT)
    assert not refused.accepted and refused.code == "closed"


def test_a_meter_requested_row_is_journaled_and_recovered(tmp_path: Path) -> None:
    params = linked()
    path = tmp_path / "l.db"
    ledger = Ledger.open(path, params, at="2026-01-01T00:00:00Z")
    state = ledger.state
    for command in (Sensors(present=frozenset({4})), Lock(), KeyHand(seat=4, hand="royal-flush")):
        decision = ok(decide(params, state, command, LINKED_PORT))
        ledger.append(decision.events, decision.state, at="2026-01-01T00:00:01Z")
        state = decision.state
    assert any(isinstance(e, MeterRequested) for e in decision.events)
    ledger.close()
    again = Ledger.open(path, params, at="2026-01-01T00:00:02Z")
    assert again.state.awaiting == state.awaiting
    again.close()
    with sqlite3.connect(path) as auditor:  # what docs/ledger.md tells an auditor to read
        rows = auditor.execute("SELECT data FROM journal WHERE category='engine'").fetchall()
    assert "meter_requested" in [json.loads(d)["kind"] for (d,) in rows]
    assert verify(path, replay=True).ok


def test_a_meter_named_otherwise_at_the_link_is_sent_by_its_id_there_and_keyed_by_ours() -> None:
    """``link_meter``: contributions and claims name the link's ``pmg``; the awards, the
    round and an outbox rebuilt from the ledger's ``link_sent`` rows keep the table's ``main``."""
    params = replace(linked(), meters=(MeterParams(id="main", link="link-a", link_meter="pmg"),))
    sequencer = LinkOutbox(params, "link-a", "progressive")
    state, sent = TableState(), []
    for command in (Sensors(present=frozenset({4})), Lock(), KeyHand(seat=4, hand="royal-flush")):
        decision = ok(decide(params, state, command, LINKED_PORT))
        out = sequencer.outgoing(state, decision.state, decision.events, "dealer", "t", (1, HASH))
        sequencer.committed(out)
        sent += [dict(r.detail["message"]) for r in out.records]
        state = decision.state
    contribution, claim = sent
    assert contribution["wagers"] == [{"meter": "pmg", "count": 1, "units": 1_000_000}]
    assert claim["meter"] == "pmg"
    rebuilt = LinkOutbox(params, "link-a", "progressive")
    rebuilt.load([{"seq": m["seq"], "message": m} for m in sent])  # as after a restart
    for outbox in (sequencer, rebuilt):
        answer = outbox.answer(state, claim, result(claim, units=1_000_000_000), "t")
        assert answer is not None
        (keyed,) = answer.events
        assert isinstance(keyed, AwardKeyed) and keyed.meter == "main"
        assert ok(decide(params, state, answer, LINKED_PORT)).state.awards[0].meter == "main"


def test_a_link_refusal_closes_the_linked_meters_as_link_down_does() -> None:
    mixed = linked()
    closed = SetClosed(reason="link refused: unknown-meter", closed=True)
    state = ok(decide(mixed, TableState(), closed)).state
    state = ok(decide(mixed, state, Sensors(present=frozenset({1})), LINKED_PORT)).state
    locked = ok(decide(mixed, state, Lock(), LINKED_PORT))  # the local meter still plays
    assert locked.state.linked_off
    refused = decide(mixed, locked.state, KeyHand(seat=1, hand="royal-flush"), LINKED_PORT)
    assert not isinstance(refused, Accepted) and refused.code == "link-closed"
    only_linked = linked(local=False)
    state = ok(decide(only_linked, TableState(), closed)).state
    state = ok(decide(only_linked, state, Sensors(present=frozenset({1})), LINKED_PORT)).state
    lock = decide(only_linked, state, Lock(), LINKED_PORT)
    assert not isinstance(lock, Accepted) and lock.code == "closed"
