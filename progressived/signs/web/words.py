"""The sign's words for a closed progressive: typed reasons, words for players, details for staff.

The controller says why its progressive is closed in the meter's ``closed`` list and in
``table_closed`` events (docs/mqtt.md); a linked table adds ``link-down`` and the reasons of
a link it is waiting for or was refused by (docs/link.md). Each token is read once into a
:class:`Closure`, and everything the sign shows is decided from that type, never from
message text. Players read a short calm line (:func:`player_words`); the reason in words
for staff (:data:`STAFF_WORDS`) goes to ``/state.json`` and the logs, never to the screen:
a sign on the floor does not explain the controller's plumbing, nor name a code.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class Closure(Enum):
    """Why a progressive is closed, as the sign understands it."""

    BOARD_OFFLINE = "board offline"
    SELF_CHECK_FAILED = "self-check failed"
    OPERATOR = "operator"
    LEDGER_UNAVAILABLE = "ledger unavailable"
    LINK_DOWN = "link-down"
    WAITING_FOR_LINK = "waiting for link"
    LINK_REFUSED = "link refused"  # ``link refused: CODE`` (docs/link.md)
    CONTROLLER_OFFLINE = "controller offline"  # the table's status is ``offline``
    OTHER = "other"  # a reason this release does not know


class Shown(Enum):
    """What players read for a closed progressive (the first that applies, in this order)."""

    CLOSED = "Progressive closed"
    BACK_SHORTLY = "Progressive closed · back shortly"
    UPDATING = "Jackpot meter updating soon"


LINK_REFUSED = "link refused: "
_BY_TOKEN = {c.value: c for c in Closure if c not in (Closure.LINK_REFUSED, Closure.OTHER)}
_SHOWN = {
    Closure.BOARD_OFFLINE: Shown.BACK_SHORTLY,
    Closure.CONTROLLER_OFFLINE: Shown.BACK_SHORTLY,
    Closure.LINK_DOWN: Shown.UPDATING,
    Closure.WAITING_FOR_LINK: Shown.UPDATING,
}  # every other closure: Shown.CLOSED

# For staff (``/state.json``'s ``closed_reason``, the logs): what each reason means.
STAFF_WORDS = {
    Closure.BOARD_OFFLINE: "the table's bet sensors are offline",
    Closure.SELF_CHECK_FAILED: "the controller failed its start-up self-check",
    Closure.OPERATOR: "closed by an operator",
    Closure.LEDGER_UNAVAILABLE: "the jackpot's records are unavailable",
    Closure.LINK_DOWN: "the link to the jackpot controller is down",
    Closure.WAITING_FOR_LINK: "waiting for the linked jackpot",
    Closure.LINK_REFUSED: "the link controller refused this table (see its code)",
    Closure.CONTROLLER_OFFLINE: "the table's status is offline (its controller stopped, or "
    "lost its broker connection)",
    Closure.OTHER: "a reason this sign does not know",
}


def closure(token: str) -> Closure:
    """A ``closed`` token (docs/mqtt.md, docs/link.md) as its type."""
    if token.startswith(LINK_REFUSED):
        return Closure.LINK_REFUSED
    return _BY_TOKEN.get(token, Closure.OTHER)


def player_words(closures: Iterable[Closure]) -> str:
    """One short line for players: closed, closed for a moment, or the meter updating soon."""
    shown = {_SHOWN.get(c, Shown.CLOSED) for c in closures} or {Shown.CLOSED}
    for candidate in Shown:
        if candidate in shown:
            return candidate.value
    return Shown.CLOSED.value


def staff_words(tokens: Iterable[str]) -> str:
    """The reasons for staff, each once, the controller's own token after it."""
    said: list[str] = []
    for token in tokens:
        line = f"{STAFF_WORDS[closure(token)]} ({token})"
        if line not in said:
            said.append(line)
    return "; ".join(said)
