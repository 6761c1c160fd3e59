"""The archive's pure core: a table's chain judged as its rows arrive, and its messages
read with bounds (docs/archive.md)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from progressived.archive.core import chain, wire
from progressived.archive.core.chain import Head, Outcome
from tests.archive_helpers import TABLE, rewritten, rows_of, table_ledger


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[wire.Row]:
    return rows_of(table_ledger(tmp_path_factory.mktemp("archive") / "ledger.db"))


def archived(rows: list[wire.Row]) -> dict[int, str]:
    return {r.seq: r.hash for r in rows}


def test_a_chain_is_taken_in_runs_and_a_repeat_stores_nothing(rows: list[wire.Row]) -> None:
    assert any(r.idem_key is not None for r in rows)  # idempotency keys travel with their rows
    first = chain.judge(Head(), TABLE, rows[:10], {})
    assert first.outcome is Outcome.STORE
    assert first.head == Head(rows[9].seq, rows[9].hash)
    rest = chain.judge(first.head, TABLE, rows[5:], archived(rows[:10]))
    assert rest.outcome is Outcome.STORE
    assert [r.seq for r in rest.fresh] == [r.seq for r in rows[10:]]
    again = chain.judge(rest.head, TABLE, rows[3:8], archived(rows))
    assert again.outcome is Outcome.REPEAT
    assert again.head == rest.head


def test_a_gap_asks_for_the_rows_from_the_head(rows: list[wire.Row]) -> None:
    head = Head(rows[4].seq, rows[4].hash)
    verdict = chain.judge(head, TABLE, rows[7:9], {})
    assert verdict.outcome is Outcome.RESEND
    assert verdict.head == head


def test_an_edited_row_is_a_broken_chain(rows: list[wire.Row]) -> None:
    edited = dataclasses.replace(rows[3], actor="someone-else")
    verdict = chain.judge(Head(), TABLE, [*rows[:3], edited, *rows[4:6]], {})
    assert verdict.outcome is Outcome.REFUSED
    assert (verdict.code, verdict.seq) == (chain.CHAIN_BROKEN, rows[3].seq)
    assert not verdict.fresh and verdict.head == Head()
    # The table's id is part of every hash: another table's rows do not chain here.
    other = chain.judge(Head(), "another-table", rows[:3], {})
    assert other.outcome is Outcome.REFUSED and other.code == chain.CHAIN_BROKEN


def test_a_consistently_rewritten_tail_is_refused(rows: list[wire.Row]) -> None:
    forged = rewritten(rows, 6)
    head = Head(rows[9].seq, rows[9].hash)
    # Its own chain checks out, but row 7 is not the archived one.
    verdict = chain.judge(head, TABLE, forged[6:12], archived(rows[:10]))
    assert verdict.outcome is Outcome.REFUSED
    assert (verdict.code, verdict.seq) == (chain.REWRITTEN, rows[6].seq)
    # Sent only after the head: it does not follow the archived row.
    after = chain.judge(head, TABLE, forged[10:12], {})
    assert (after.outcome, after.code) == (Outcome.REFUSED, chain.REWRITTEN)
    # A first row that does not start from the genesis hash.
    fresh = chain.judge(Head(), TABLE, forged[6:8], {})
    assert fresh.outcome is Outcome.RESEND  # row 7 first: the archive wants row 1


def test_messages_round_trip(rows: list[wire.Row]) -> None:
    payload = wire.encode_rows(TABLE, rows[:20])
    message = wire.decode_rows(payload.encode())
    assert message.table == TABLE
    assert list(message.rows) == rows[:20]
    head = wire.HeadMessage("archive-a", TABLE, 20, rows[19].hash, "ok", "", "", "t")
    assert wire.decode_head(wire.encode_head(head)) == head
    assert wire.table_of("progressive", "progressive/archive/arch-1/rows") == TABLE
    assert wire.table_of("progressive", "progressive/archive/arch-1/head") is None


def _mutated(rows: list[wire.Row], **change: object) -> bytes:
    message = json.loads(wire.encode_rows(TABLE, rows[:2]))
    message["rows"][0].update(change)
    return json.dumps(message).encode()


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda rows: b"\xff\xfe", "bad-json"),
        (lambda rows: b"[" * 5000, "too-deep"),
        (lambda rows: b" " * (wire.MAX_MESSAGE + 1), "too-large"),
        (lambda rows: b'{"type":"rows","table":"t","rows":[],"x":1}', "bad-field"),
        (lambda rows: b'{"type":"rows","table":"t","rows":[]}', "out-of-range"),
        (lambda rows: _mutated(rows, seq=2.0), "bad-type"),
        (lambda rows: _mutated(rows, seq=0), "out-of-range"),
        (lambda rows: _mutated(rows, hash="ABC"), "bad-field"),
        (lambda rows: _mutated(rows, kind="a|b"), "bad-field"),
        (lambda rows: _mutated(rows, data="{not json"), "bad-field"),
        (lambda rows: _mutated(rows, category="money"), "bad-field"),
        (lambda rows: _mutated(rows, idem_key="k", idem_last=None), "bad-field"),
        (lambda rows: _mutated(rows, extra=1), "bad-field"),
    ],
)
def test_hostile_payloads_are_refused_with_a_code(rows: list[wire.Row], make: object, code: str) -> None:
    with pytest.raises(wire.ArchiveWireError) as refused:
        wire.decode_rows(make(rows))  # type: ignore[operator]
    assert refused.value.code == code


def test_one_tables_flood_costs_the_others_a_turn() -> None:
    from progressived.archive.service.lanes import STRANGERS, Lanes

    lanes = Lanes("progressive", frozenset({"a", "b"}), lane_max=10)
    topic = "progressive/archive/{}/rows".format
    filed = [lanes.file(topic("a"), b"%d" % i) for i in range(15)]
    assert filed == [True] * 10 + [False] * 5  # a full lane drops, counted
    assert lanes.file(topic("b"), b"b0")
    assert not lanes.file("progressive/archive/a/head", b"x")  # not a rows topic
    for i in range(10):
        lanes.file(topic("zz"), b"%d" % i)  # strangers share one small lane
    assert lanes.dropped == {"a": 5, STRANGERS: 2}
    first = lanes.take(3)
    assert [t for t, _ in first] == ["a", "b", "zz"]  # each waiting lane in turn
    assert [p for t, p in lanes.take(100) if t == "a"] == [b"%d" % i for i in range(1, 10)]
