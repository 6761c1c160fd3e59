"""The sign's words for a closed progressive: every documented reason, in plain English.

The controller says why its progressive is closed in the meter's ``closed`` list and in
``table_closed`` events (docs/mqtt.md); a linked table adds ``link-down`` and the reasons of
a link it is waiting for or was refused by (docs/link.md). Players and floor staff read a
sentence, not a token; a reason this release does not know is shown as it came, so nothing
the controller says is hidden.
"""

from __future__ import annotations

from collections.abc import Iterable

CLOSED_WORDS = {
    "board offline": "The table's bet sensors are offline",
    "self-check failed": "The controller failed its start-up self-check",
    "operator": "Closed by an operator",
    "ledger unavailable": "The jackpot's records are unavailable",
    "link-down": "The link to the jackpot controller is down",
    "waiting for link": "Waiting for the linked jackpot",
    "controller offline": "The table's jackpot controller is offline",
}
# ``link refused: CODE`` (docs/link.md, "A refusal resending cannot cure"): the link
# controller refused this table's messages for a reason only a configuration change cures.
LINK_REFUSED = "link refused: "
LINK_REFUSED_WORDS = "The linked jackpot refused this table: its set-up needs attention"


def closed_words(reasons: Iterable[str]) -> list[str]:
    """Each reason as a sentence (unknown ones verbatim), in the order given, once each."""
    said: list[str] = []
    for reason in reasons:
        words = CLOSED_WORDS.get(reason, reason)
        if reason.startswith(LINK_REFUSED):
            words = f"{LINK_REFUSED_WORDS} ({reason[len(LINK_REFUSED):]})"
        if words not in said:
            said.append(words)
    return said
