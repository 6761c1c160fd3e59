"""What an operator does about a link refusal that closed the linked progressive.

Its own module, importing nothing: ``progressivectl status`` says the same words as the
daemon's ``health`` and log without loading the link's message models (a second of
start-up on a table-side computer).
"""

from __future__ import annotations

LEDGERS_DISAGREE = frozenset({"conflict", "head-regressed"})


def advice(code: str) -> str:
    """What an operator does about a closing refusal ``code`` (docs/link.md, "Refusal
    codes"; docs/operations.md, "Troubleshooting").

    ``conflict`` and ``head-regressed`` are not a configuration to fix: the table's ledger
    and the link's record of it disagree (a ledger restored from an older copy, or replaced
    under the running daemon), and opening the table would only be refused again.
    """
    if code in LEDGERS_DISAGREE:
        return (
            "the table's ledger and the link's record of it disagree (a ledger restored from "
            "an older copy, or replaced): keep the table closed, put back the ledger the "
            "daemon wrote last if it was replaced, compare the ledgers with progressivectl "
            "link reconcile, then progressivectl open"
        )
    return "fix the configuration, then progressivectl open"
