"""The dealer's keypad: which key codes mean what, and the key-sequence interpreter.

Pure (no I/O, no clock): the interpreter turns key presses from the board into engine
commands, "pending" (a sequence waiting for its next key) or a refusal with a message for
the dealer's display. A sequence that makes no sense is refused and the pending sequence
dropped, never guessed at.

The key codes come from a :class:`progressived.config.keypad.KeypadMap` (the configuration's
``[keypad]`` section, read and validated there). Key sequences (defaults in brackets)::

    LOCK                         [LOCK]   Lock
    SEATn HAND                   [S1..S12, H1..Hn]   KeyHand(seat=n, hand) (again: unkey)
    SAME SEATa SEATb ... SAME    [SAME]   SamePlayer(seats) (CONFIRM also ends it)
    CONFIRM | REJECT             [OK | NO]   the first award awaiting the supervisor
    VOID CONFIRM                 [VOID]   Void (misdeal); needs the supervisor
    RECONCILE                    [RECON]  Reconcile
    CLEAR                        [CLR]    drop the pending sequence
    SUPERVISOR then CONFIRM | REJECT | VOID CONFIRM   [SUP]   a supervisor button press
                                 authorises the next command only; the key switch
                                 (a SupervisorKey event) authorises while it is on

Whether the supervisor is needed is the engine's rule: CONFIRM, REJECT and VOID go to the
engine with ``supervisor=`` the switch (or button) state and the engine refuses them if not.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, assert_never, runtime_checkable

from progressived.board.keystates import (
    Action,
    AfterSeat,
    AfterSupervisor,
    AfterVoid,
    Function,
    HandKey,
    OtherHandKey,
    Pending,
    SamePlayerSeats,
    SeatKey,
    describe,
    label,
)
from progressived.engine.commands import (
    Command,
    Confirm,
    KeyHand,
    Lock,
    Reconcile,
    Reject,
    SamePlayer,
    Void,
)

MAX_SEATS = 12
VOID_PROMPT = "VOID: press CONFIRM to void the round"


class KeyCodes(Protocol):
    """What the interpreter reads of a keypad map (``progressived.config.keypad.KeypadMap``,
    the validated ``[keypad]`` section, is one): the code of every key."""

    @property
    def lock(self) -> str: ...
    @property
    def supervisor(self) -> str: ...
    @property
    def confirm(self) -> str: ...
    @property
    def reject(self) -> str: ...
    @property
    def void(self) -> str: ...
    @property
    def same_player(self) -> str: ...
    @property
    def reconcile(self) -> str: ...
    @property
    def clear(self) -> str: ...
    @property
    def seats(self) -> Sequence[str]: ...
    @property
    def hands(self) -> Mapping[str, str]: ...
    @property
    def sequence_timeout_s(self) -> float: ...
    def hand_codes(self, hand_ids: Sequence[str]) -> Mapping[str, str]: ...


class KeypadError(ValueError):
    """A keypad map that cannot serve the table (e.g. a paytable hand without a key)."""


# --------------------------------------------------------------------------- interpreter


@runtime_checkable
class KeyEventLike(Protocol):
    """A key press (``progressived_drivers.base.KeyPressed`` fits)."""

    @property
    def code(self) -> str: ...


@runtime_checkable
class SupervisorEventLike(Protocol):
    """The supervisor key switch (``progressived_drivers.base.SupervisorKey`` fits)."""

    @property
    def on(self) -> bool: ...


class OutcomeKind(enum.StrEnum):
    COMMAND = "command"  # give ``command`` to the engine
    PENDING = "pending"  # waiting for the next key of a sequence
    REFUSED = "refused"  # the sequence makes no sense; the pending sequence is dropped
    CLEARED = "cleared"  # CLEAR dropped the pending sequence
    SUPERVISOR = "supervisor"  # the supervisor key switch turned on or off


@dataclass(frozen=True, slots=True)
class KeyOutcome:
    """What one key did, and what the dealer's display should show."""

    kind: OutcomeKind
    display: str
    command: Command | None = None

    @property
    def refused(self) -> bool:
        return self.kind is OutcomeKind.REFUSED


def _parse_at(at: str) -> datetime | None:
    try:
        return datetime.fromisoformat(at)
    except ValueError:
        return None


class KeypadInterpreter:
    """Turns the board's key events into engine commands (one interpreter per table)."""

    def __init__(self, keymap: KeyCodes, hand_ids: Sequence[str], seats: int) -> None:
        if not 1 <= seats <= MAX_SEATS:
            raise KeypadError(f"seats must be 1..{MAX_SEATS}")
        if seats > len(keymap.seats):
            raise KeypadError(f"the keypad map has keys for {len(keymap.seats)} seats, not {seats}")
        self.keymap = keymap
        self.seats = seats
        self.hand_ids = tuple(hand_ids)
        self._actions: dict[str, Action] = {
            keymap.lock: Function.LOCK,
            keymap.supervisor: Function.SUPERVISOR,
            keymap.confirm: Function.CONFIRM,
            keymap.reject: Function.REJECT,
            keymap.void: Function.VOID,
            keymap.same_player: Function.SAME_PLAYER,
            keymap.reconcile: Function.RECONCILE,
            keymap.clear: Function.CLEAR,
        }
        for n, code in enumerate(keymap.seats, start=1):
            self._actions[code] = SeatKey(n)
        for hand, code in keymap.hand_codes(self.hand_ids).items():
            if code in self._actions:
                raise KeypadError(f"key code {code!r} used for hand {hand} and another function")
            self._actions[code] = HandKey(hand)
        for hand, code in keymap.hands.items():  # keys of hands not in this paytable
            self._actions.setdefault(code, OtherHandKey(hand))
        self._pending: Pending | None = None
        self.supervisor_on = False

    @property
    def pending(self) -> bool:
        return self._pending is not None

    def reset(self) -> None:
        """Drop any pending sequence and assume the supervisor switch off (board offline)."""
        self._pending = None
        self.supervisor_on = False

    def feed(self, event: KeyEventLike | SupervisorEventLike, at: str) -> KeyOutcome:
        if isinstance(event, KeyEventLike):
            return self.press(event.code, at)
        if isinstance(event, SupervisorEventLike):
            return self.supervisor(event.on)
        raise TypeError(f"not a key event: {event!r}")

    def supervisor(self, on: bool) -> KeyOutcome:
        self.supervisor_on = on
        return KeyOutcome(OutcomeKind.SUPERVISOR, f"SUPERVISOR KEY {'ON' if on else 'OFF'}")

    def press(self, code: str, at: str) -> KeyOutcome:
        now = _parse_at(at)
        note = ""
        pending = self._pending
        if pending is not None and pending.since is not None and now is not None:
            waited = (now - pending.since).total_seconds()
            if waited > self.keymap.sequence_timeout_s:
                note = f"({describe(pending)} timed out) "
                self._pending = pending = None
        action = self._actions.get(code)
        if action is None:
            return self._refuse(f"{note}unknown key {code!r}")
        outcome = self._step(action, at, now)
        if note:
            return KeyOutcome(outcome.kind, note + outcome.display, outcome.command)
        return outcome

    # ------------------------------------------------------------------ the grammar

    def _refuse(self, why: str) -> KeyOutcome:
        dropped = self._pending
        self._pending = None
        tail = f"; {describe(dropped)} cancelled" if dropped is not None else ""
        return KeyOutcome(OutcomeKind.REFUSED, f"REFUSED: {why}{tail}")

    def _wait(self, pending: Pending, display: str) -> KeyOutcome:
        self._pending = pending
        return KeyOutcome(OutcomeKind.PENDING, display)

    def _done(self, command: Command, display: str) -> KeyOutcome:
        self._pending = None
        return KeyOutcome(OutcomeKind.COMMAND, display, command)

    def _actor(self, supervisor: bool) -> str:
        return "supervisor" if supervisor else "dealer"

    def _step(self, action: Action, at: str, now: datetime | None) -> KeyOutcome:
        """One key: the keys that mean the same in every state, then the pending state's
        own handler (one per state)."""
        pending = self._pending
        if action is Function.CLEAR:
            if pending is None:
                return KeyOutcome(OutcomeKind.CLEARED, "CLEAR: nothing to clear")
            self._pending = None
            return KeyOutcome(OutcomeKind.CLEARED, f"CLEAR: {describe(pending)} cancelled")
        if isinstance(action, OtherHandKey):
            return self._refuse(f"hand {action.hand} is not in this table's paytable")
        if isinstance(action, SeatKey) and action.seat > self.seats:
            return self._refuse(
                f"there is no seat {action.seat} at this table ({self.seats} seats)"
            )
        match pending:
            case None:
                return self._idle(action, at, now)
            case AfterSeat():
                return self._after_seat(pending, action, at)
            case SamePlayerSeats():
                return self._same_player(pending, action, at, now)
            case AfterVoid():
                return self._after_void(pending, action, at)
            case AfterSupervisor():
                return self._after_supervisor(action, at, now)
            case _:
                assert_never(pending)

    def _after_seat(self, pending: AfterSeat, action: Action, at: str) -> KeyOutcome:
        if isinstance(action, HandKey):
            return self._done(
                KeyHand(seat=pending.seat, hand=action.hand, at=at, actor="dealer"),
                f"SEAT {pending.seat} {action.hand}",
            )
        return self._refuse(
            f"SEAT {pending.seat} must be followed by a hand key, not {label(action)}"
        )

    def _same_player(
        self, pending: SamePlayerSeats, action: Action, at: str, now: datetime | None
    ) -> KeyOutcome:
        if isinstance(action, SeatKey):
            if action.seat in pending.seats:
                return self._refuse(f"seat {action.seat} pressed twice in SAME-PLAYER")
            seats = (*pending.seats, action.seat)
            return self._wait(
                SamePlayerSeats(now, seats),
                "SAME-PLAYER " + " ".join(map(str, seats)) + ": more seats, then SAME",
            )
        if action in (Function.SAME_PLAYER, Function.CONFIRM):
            if len(pending.seats) < 2:
                return self._refuse("SAME-PLAYER needs at least two seats")
            return self._done(
                SamePlayer(seats=frozenset(pending.seats), at=at, actor="dealer"),
                "SAME-PLAYER " + " ".join(map(str, pending.seats)),
            )
        return self._refuse(f"SAME-PLAYER takes seat keys, then SAME; not {label(action)}")

    def _after_void(self, pending: AfterVoid, action: Action, at: str) -> KeyOutcome:
        if action is Function.CONFIRM:
            auth = pending.supervisor or self.supervisor_on
            return self._done(Void(supervisor=auth, at=at, actor=self._actor(auth)), "VOID")
        return self._refuse(f"VOID must be followed by CONFIRM, not {label(action)}")

    def _after_supervisor(self, action: Action, at: str, now: datetime | None) -> KeyOutcome:
        if action is Function.CONFIRM:
            return self._done(Confirm(supervisor=True, at=at, actor="supervisor"), "CONFIRM")
        if action is Function.REJECT:
            return self._done(Reject(supervisor=True, at=at, actor="supervisor"), "REJECT")
        if action is Function.VOID:
            return self._wait(AfterVoid(now, supervisor=True), VOID_PROMPT)
        return self._refuse(
            f"SUPERVISOR must be followed by CONFIRM, REJECT or VOID, not {label(action)}"
        )

    def _idle(self, action: Action, at: str, now: datetime | None) -> KeyOutcome:
        """Nothing pending: a key that stands alone, or the first key of a sequence."""
        sup = self.supervisor_on
        match action:
            case Function.LOCK:
                return self._done(Lock(at=at, actor="dealer"), "LOCK")
            case SeatKey(seat):
                return self._wait(AfterSeat(now, seat), f"SEAT {seat}: press the hand")
            case HandKey(hand):
                return self._refuse(f"press a seat before the hand ({hand})")
            case Function.CONFIRM:
                return self._done(Confirm(supervisor=sup, at=at, actor=self._actor(sup)), "CONFIRM")
            case Function.REJECT:
                return self._done(Reject(supervisor=sup, at=at, actor=self._actor(sup)), "REJECT")
            case Function.VOID:
                return self._wait(AfterVoid(now, supervisor=sup), VOID_PROMPT)
            case Function.SAME_PLAYER:
                return self._wait(SamePlayerSeats(now), "SAME-PLAYER: press the seats, then SAME")
            case Function.RECONCILE:
                return self._done(Reconcile(at=at, actor="dealer"), "RECONCILE")
            case Function.SUPERVISOR:
                return self._wait(AfterSupervisor(now), "SUPERVISOR: press CONFIRM, REJECT or VOID")
            case Function.CLEAR | OtherHandKey():  # answered by _step before any state
                return self._refuse(f"key {label(action)} makes no sense here")
            case _:
                assert_never(action)
