"""The ledger's written-out event text (ledger/event_text.py) is byte for byte the encoder's
text of ``event_to_dict`` -- the text the hash chain covers -- for every event kind the
engine emits and for drawn values of every plain type (and ``None`` where it leaves the
value to the encoder, never a different text)."""

from __future__ import annotations

import enum
import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.stress import demo_params, round_commands
from progressived.engine import decide, event_to_dict, initial_state
from progressived.engine.events import (
    LinkedContribution,
    Posting,
    RoundLocked,
    SensorsChanged,
    TableClosed,
)
from progressived.ledger.event_text import event_text
from progressived.ledger.rows import dumps
from tests.budget import examples

AT = "2026-11-21T19:00:00.000000Z"


class _Reason(enum.StrEnum):
    DOWN = "link-down"


class _Count(enum.IntEnum):
    ONE = 1


def _same(event: object) -> str | None:
    text = event_text(event)
    if text is not None:
        assert text == dumps(event_to_dict(event))
    return text


def test_every_kind_the_engine_emits() -> None:
    params = demo_params()
    rng = random.Random(11)
    state = initial_state(params).state
    written: set[str] = set()
    kinds: set[str] = set()
    for _ in range(200):
        for command in round_commands(rng, params):
            decision = decide(params, state, replace(command, at=AT))
            if decision.accepted:
                state = decision.state
                for event in decision.events:
                    kinds.add(event.kind)
                    if _same(event) is not None:
                        written.add(event.kind)
    # The hot kinds are written out, not left to the encoder.
    assert {"wager_locked", "round_locked", "sensors_changed", "award_keyed"} <= written
    assert kinds - written <= {"round_reconciled", "meter_requested"}  # a settlement, a request


texts = st.text(st.characters(codec="utf-8"), max_size=12)
plain = st.one_of(st.none(), st.booleans(), st.integers(), texts, st.floats(allow_nan=False))


@settings(max_examples=examples(400), deadline=None)
@given(
    at=st.one_of(texts, st.just(_Reason.DOWN), st.integers()),
    round_no=st.one_of(st.integers(), st.none(), st.booleans(), st.just(_Count.ONE)),
    source=texts,
    count=st.one_of(st.integers(), st.booleans(), st.just(_Count.ONE), st.floats(allow_nan=False)),
    legs=st.lists(st.tuples(texts, st.one_of(st.integers(), st.booleans())), max_size=4),
    seats=st.one_of(st.lists(plain, max_size=4).map(tuple), st.lists(st.integers(), max_size=3)),
)
def test_drawn_values_give_the_encoders_text(
    at: object,
    round_no: object,
    source: str,
    count: object,
    legs: list[tuple[str, int]],
    seats: object,
) -> None:
    postings = tuple(Posting(account, units) for account, units in legs)
    events = [
        LinkedContribution(
            at=at,
            round=round_no,
            source_table=source,
            count=count,
            units=7,
            contribution_id=source,
            postings=postings,
        ),
        RoundLocked(at=AT, round=1, seats=seats),
        SensorsChanged(at=AT, round=1, present=seats),
        TableClosed(at=AT, round=1, reason=_Reason.DOWN),
    ]
    for event in events:
        _same(event)


def test_the_plain_cases_are_written_out() -> None:
    event = LinkedContribution(
        at=AT,
        round=3,
        source_table="t-2",
        count=2,
        units=20,
        contribution_id='t-2:\u00e9\n"',
        postings=(Posting("linked_wagers", -20), Posting("meter:main", 20)),
    )
    assert _same(event) is not None
    assert _same(replace(event, postings=[Posting("a", 1)])) is None
    assert _same(RoundLocked(at=AT, round=1, seats=(1, (2, True), None, "x"))) is not None
