"""The keypad map and the key-sequence interpreter (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest
from progressived_drivers.base import KeyPressed, SupervisorKey

from progressived.board.keypad import KeyOutcome, KeypadError, KeypadInterpreter, OutcomeKind
from progressived.config.keypad import KeypadMap, keypad_from_config, load_keypad
from progressived.config.paytables import find_paytable
from progressived.config.table import ConfigError
from progressived.core.params import MeterParams, TableParams
from progressived.engine import (
    Confirm,
    KeyHand,
    Lock,
    Reconcile,
    Reject,
    SamePlayer,
    Sensors,
    Void,
    decide,
    initial_state,
)
from progressived.engine.state import Phase

ROOT = Path(__file__).resolve().parent.parent
AT = "2026-11-21T19:00:00Z"
TCP = find_paytable("tcp-sd-1")


def at(seconds: int) -> str:
    return f"2026-11-21T19:00:{seconds:02d}Z"


@pytest.fixture
def kp() -> KeypadInterpreter:
    return KeypadInterpreter(KeypadMap(), TCP.hand_ids, seats=7)


def keys(kp: KeypadInterpreter, *codes: str) -> list[KeyOutcome]:
    return [kp.press(code, AT) for code in codes]


def test_documented_defaults() -> None:
    m = KeypadMap()
    assert (m.lock, m.supervisor, m.confirm, m.reject, m.void) == (
        "LOCK",
        "SUP",
        "OK",
        "NO",
        "VOID",
    )
    assert (m.same_player, m.reconcile, m.clear) == ("SAME", "RECON", "CLR")
    assert m.seats[:3] == ["S1", "S2", "S3"]
    assert len(m.seats) == 12
    assert m.hand_codes(TCP.hand_ids) == {
        "akq-spades": "H1",
        "akq-suited": "H2",
        "straight-flush": "H3",
        "three-of-a-kind": "H4",
        "straight": "H5",
    }
    assert load_keypad(ROOT / "config" / "keypad.example.toml") == m
    assert keypad_from_config({}) == m


def test_lock_reconcile_and_seat_then_hand(kp: KeypadInterpreter) -> None:
    assert kp.press("LOCK", AT).command == Lock(at=AT)
    seat = kp.press("S3", AT)
    assert seat.kind is OutcomeKind.PENDING
    assert "SEAT 3" in seat.display
    hand = kp.press("H3", AT)
    assert hand.kind is OutcomeKind.COMMAND
    assert hand.command == KeyHand(seat=3, hand="straight-flush", at=AT)
    assert not kp.pending
    assert kp.press("RECON", AT).command == Reconcile(at=AT)


@pytest.mark.parametrize(
    ("codes", "why"),
    [
        (("H1",), "press a seat"),
        (("S3", "LOCK"), "must be followed by a hand key"),
        (("S3", "S4"), "must be followed by a hand key"),
        (("S9",), "no seat 9"),
        (("F13",), "unknown key"),
        (("SAME", "S1", "SAME"), "at least two seats"),
        (("SAME", "S1", "S1"), "pressed twice"),
        (("SAME", "S1", "LOCK"), "SAME-PLAYER takes seat keys"),
        (("VOID", "LOCK"), "VOID must be followed by CONFIRM"),
        (("SUP", "LOCK"), "SUPERVISOR must be followed by"),
    ],
)
def test_nonsense_is_refused_never_guessed(
    kp: KeypadInterpreter, codes: tuple[str, ...], why: str
) -> None:
    outcomes = keys(kp, *codes)
    last = outcomes[-1]
    assert last.kind is OutcomeKind.REFUSED
    assert last.command is None
    assert why in last.display
    assert last.display.startswith("REFUSED")
    assert not kp.pending
    # the refused sequence is gone: a hand key now is not applied to the old seat
    assert kp.press("H1", AT).refused


def test_refusal_names_the_cancelled_sequence(kp: KeypadInterpreter) -> None:
    kp.press("S5", AT)
    out = kp.press("OK", AT)
    assert out.refused
    assert "SEAT 5 cancelled" in out.display


def test_clear(kp: KeypadInterpreter) -> None:
    assert kp.press("CLR", AT).kind is OutcomeKind.CLEARED
    kp.press("S2", AT)
    out = kp.press("CLR", AT)
    assert out.kind is OutcomeKind.CLEARED
    assert "SEAT 2 cancelled" in out.display
    assert kp.press("H1", AT).refused


def test_same_player(kp: KeypadInterpreter) -> None:
    outcomes = keys(kp, "SAME", "S2", "S4", "S5", "SAME")
    assert [o.kind for o in outcomes[:-1]] == [OutcomeKind.PENDING] * 4
    assert outcomes[-1].command == SamePlayer(seats=frozenset({2, 4, 5}), at=AT)
    assert keys(kp, "SAME", "S1", "S2", "OK")[-1].command == SamePlayer(
        seats=frozenset({1, 2}), at=AT
    )


def test_supervisor_switch_button_and_the_engine_rule(kp: KeypadInterpreter) -> None:
    # without the supervisor the command still goes to the engine, which refuses it
    assert kp.press("OK", AT).command == Confirm(supervisor=False, at=AT, actor="dealer")
    assert kp.press("NO", AT).command == Reject(supervisor=False, at=AT, actor="dealer")
    # the key switch authorises while on
    assert kp.feed(SupervisorKey(on=True), AT).kind is OutcomeKind.SUPERVISOR
    assert kp.press("OK", AT).command == Confirm(supervisor=True, at=AT, actor="supervisor")
    assert keys(kp, "VOID", "OK")[-1].command == Void(supervisor=True, at=AT, actor="supervisor")
    kp.feed(SupervisorKey(on=False), AT)
    assert keys(kp, "VOID", "OK")[-1].command == Void(supervisor=False, at=AT, actor="dealer")
    # the button authorises the next command only
    assert keys(kp, "SUP", "NO")[-1].command == Reject(supervisor=True, at=AT, actor="supervisor")
    assert keys(kp, "SUP", "VOID", "OK")[-1].command == Void(
        supervisor=True, at=AT, actor="supervisor"
    )
    assert kp.press("OK", AT).command == Confirm(supervisor=False, at=AT, actor="dealer")


def test_feed_takes_driver_events(kp: KeypadInterpreter) -> None:
    ev = KeyPressed(code="LOCK", key_seq=1, board_id="B", idempotency_key="B:0:1")
    assert kp.feed(ev, AT).command == Lock(at=AT)


def test_a_stale_sequence_times_out(kp: KeypadInterpreter) -> None:
    kp.press("S3", at(0))
    out = kp.press("H1", at(11))
    assert out.refused
    assert "timed out" in out.display
    kp.press("S3", at(20))
    assert kp.press("H1", at(29)).command == KeyHand(seat=3, hand="akq-spades", at=at(29))


def test_reset_on_board_offline(kp: KeypadInterpreter) -> None:
    kp.feed(SupervisorKey(on=True), AT)
    kp.press("S3", AT)
    kp.reset()
    assert not kp.pending
    assert not kp.supervisor_on
    assert kp.press("H1", AT).refused


def test_configured_codes() -> None:
    m = keypad_from_config(
        {
            "keypad": {
                "lock": "F1",
                "seats": ["1", "2", "3"],
                "hands": {
                    "akq-spades": "A",
                    "akq-suited": "B",
                    "straight-flush": "C",
                    "three-of-a-kind": "D",
                    "straight": "E",
                    "royal-flush": "R",
                },
            }
        }
    )
    kp = KeypadInterpreter(m, TCP.hand_ids, seats=3)
    assert kp.press("F1", AT).command == Lock(at=AT)
    assert kp.press("LOCK", AT).refused  # the default code means nothing now
    kp.press("2", AT)
    assert kp.press("C", AT).command == KeyHand(seat=2, hand="straight-flush", at=AT)
    kp.press("2", AT)
    out = kp.press("R", AT)
    assert out.refused
    assert "not in this table's paytable" in out.display


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"lock": "OK"}, "used for both"),
        ({"hands": {"five-aces": "X"}}, "unknown hand id"),
        ({"clear": "C L"}, "printable ASCII"),
        ({"clear": ""}, "printable ASCII"),
        ({"seats": ["S1", "S1"]}, "used for both"),
        ({"hands": {"straight": "LOCK"}}, "used for both"),
        ({"colour": "red"}, "unknown key"),
    ],
)
def test_bad_maps_are_refused_at_load(section: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        keypad_from_config({"keypad": section}, "table.toml")


def test_map_must_cover_the_table() -> None:
    with pytest.raises(KeypadError, match="no key for the paytable's hands"):
        KeypadInterpreter(KeypadMap(hands={"straight": "X"}), TCP.hand_ids, seats=7)
    with pytest.raises(KeypadError, match="keys for 2 seats"):
        KeypadInterpreter(KeypadMap(seats=["A", "B"]), TCP.hand_ids, seats=7)
    with pytest.raises(KeypadError, match="also used"):
        KeypadInterpreter(KeypadMap(seats=["H1", "S2"]), TCP.hand_ids, seats=2)


def test_key_sequences_drive_the_engine() -> None:
    params = TableParams(table_id="t1", paytable=TCP, meters=(MeterParams(),), seats=7)
    state = initial_state(params, AT).state
    kp = KeypadInterpreter(KeypadMap(), TCP.hand_ids, seats=7)

    def apply(command: object) -> None:
        nonlocal state
        decision = decide(params, state, command)
        assert decision.accepted, decision
        state = decision.state

    apply(Sensors(present=frozenset({1, 3}), at=AT))
    apply(kp.press("LOCK", AT).command)
    assert state.phase is Phase.LOCKED
    assert state.locked == frozenset({1, 3})
    for code in ("S3", "H5"):
        out = kp.press(code, AT)
    apply(out.command)
    assert [(k.seat, k.hand) for k in state.keyed] == [(3, "straight")]
    apply(kp.press("RECON", AT).command)
    assert state.phase is Phase.OPEN
