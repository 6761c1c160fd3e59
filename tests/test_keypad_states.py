"""The keypad's pending states, one by one: what each waits for, how it names itself when
it is cancelled, refused or timed out (the dealer's display words are unchanged since the
states became types, progressived/board/keystates.py)."""

from __future__ import annotations

import pytest

from progressived.board.keypad import KeypadInterpreter, OutcomeKind
from progressived.board.keystates import (
    AfterSeat,
    AfterSupervisor,
    AfterVoid,
    Function,
    HandKey,
    OtherHandKey,
    SamePlayerSeats,
    SeatKey,
    describe,
    label,
)
from progressived.config.keypad import KeypadMap
from progressived.config.paytables import find_paytable

AT = "2026-11-21T19:00:00Z"
LATER = "2026-11-21T19:00:11Z"  # past the default 10 s sequence timeout
TCP = find_paytable("tcp-sd-1")

# (keys that leave the sequence pending, its name, what a stray LOCK there is told)
STATES = [
    (("S3",), "SEAT 3", "SEAT 3 must be followed by a hand key, not LOCK"),
    (("SAME", "S2"), "SAME-PLAYER", "SAME-PLAYER takes seat keys, then SAME; not LOCK"),
    (("VOID",), "VOID", "VOID must be followed by CONFIRM, not LOCK"),
    (("SUP",), "SUPERVISOR", "SUPERVISOR must be followed by CONFIRM, REJECT or VOID, not LOCK"),
]


@pytest.fixture
def kp() -> KeypadInterpreter:
    return KeypadInterpreter(KeypadMap(), TCP.hand_ids, seats=7)


def pend(kp: KeypadInterpreter, codes: tuple[str, ...], at: str = AT) -> None:
    for code in codes:
        assert kp.press(code, at).kind is OutcomeKind.PENDING
    assert kp.pending


@pytest.mark.parametrize(("codes", "name", "why"), STATES)
def test_clear_names_each_pending_state(
    kp: KeypadInterpreter, codes: tuple[str, ...], name: str, why: str
) -> None:
    pend(kp, codes)
    out = kp.press("CLR", AT)
    assert (out.kind, out.display) == (OutcomeKind.CLEARED, f"CLEAR: {name} cancelled")
    assert not kp.pending


@pytest.mark.parametrize(("codes", "name", "why"), STATES)
def test_a_stray_key_is_refused_by_each_state_in_its_words(
    kp: KeypadInterpreter, codes: tuple[str, ...], name: str, why: str
) -> None:
    pend(kp, codes)
    out = kp.press("LOCK", AT)
    assert out.refused and out.command is None
    assert out.display == f"REFUSED: {why}; {name} cancelled"
    assert not kp.pending


@pytest.mark.parametrize(("codes", "name", "why"), STATES)
def test_each_pending_state_times_out_by_name(
    kp: KeypadInterpreter, codes: tuple[str, ...], name: str, why: str
) -> None:
    pend(kp, codes)
    out = kp.press("LOCK", LATER)  # the stale sequence is dropped, then LOCK stands alone
    assert out.kind is OutcomeKind.COMMAND
    assert out.display == f"({name} timed out) LOCK"


def test_a_key_of_another_paytable_and_a_seat_past_the_table_refuse_in_any_state() -> None:
    codes = {hand: f"H{n}" for n, hand in enumerate(TCP.hand_ids, start=1)}
    codes["royal-flush"] = "R"  # a UTH hand: not on this TCP table
    kp = KeypadInterpreter(KeypadMap(hands=codes), TCP.hand_ids, seats=7)
    pend(kp, ("SAME",))
    assert kp.press("R", AT).display == (
        "REFUSED: hand royal-flush is not in this table's paytable; SAME-PLAYER cancelled"
    )
    out = kp.press("S9", AT)
    assert out.display == "REFUSED: there is no seat 9 at this table (7 seats)"


def test_the_names_the_display_shows() -> None:
    assert [label(f) for f in Function] == [
        "LOCK", "SUPERVISOR", "CONFIRM", "REJECT", "VOID", "SAME-PLAYER", "RECONCILE", "CLEAR",
    ]  # fmt: skip
    assert [label(SeatKey(2)), label(HandKey("flush")), label(OtherHandKey("x"))] == [
        "SEAT", "HAND", "OTHER-HAND",
    ]  # fmt: skip
    assert [
        describe(AfterSeat(None, 4)),
        describe(SamePlayerSeats(None, (1, 2))),
        describe(AfterVoid(None, supervisor=True)),
        describe(AfterSupervisor(None)),
    ] == ["SEAT 4", "SAME-PLAYER", "VOID", "SUPERVISOR"]
