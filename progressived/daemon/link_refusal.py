"""Which refusals from the link close the linked progressive at this table (docs/link.md,
"Refusal codes").

Most refusals concern one message (a confirm of a claim already paid, a reversal of an
unknown contribution): the table journals them and plays on. Some say that the table and
the link do not agree on the table itself, and resending cannot cure them:

* a **final** refusal (the message consumed its sequence) that every later message of its
  kind would get again, because the table's configuration and the link's disagree: the
  link has no such meter (``unknown-meter``), its meter does not pay a hand the table's
  paytable pays from it (``unknown-hand``), or it does not take the table's wagers
  (``bad-wagers``). Each such contribution is lost to the meter, each such claim refused;
* a refusal that **consumed nothing**, of a message still first in the outbox, which the
  link will refuse every time it is sent while every later message waits behind it: the
  table is not a member of the link (``unknown-table``), or the two ledgers disagree
  (``conflict``, ``head-regressed``).

Those close the linked progressive at the table (``table_closed`` with the reason
``link refused: CODE``, journaled, so a restart remembers it), as ``link-down`` does: the
linked meters' signs show CLOSED with that reason, LOCK locks only the local meters. The
closure stays until an operator, having fixed the configuration, opens the table again
(``progressivectl open``). No ledger and no broker here: the link adapter
(:mod:`progressived.daemon.link`) journals and sends.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from progressived.daemon.refusal_advice import advice
from progressived.engine.state import LINK_REFUSED
from progressived.link.core.messages import Result
from progressived.runtime.ratelimit import RateLimitedLog

log = structlog.get_logger("progressived")

REFUSED_LOG_EVERY_S = 60.0  # one error line per refusal code (closing or not) and minute

CLOSING_FINAL = frozenset({"unknown-meter", "unknown-hand", "bad-wagers"})
CLOSING_UNCONSUMED = frozenset({"unknown-table", "conflict", "head-regressed"})


def closes(code: str, *, final: bool) -> bool:
    """Whether a refusal with ``code`` (``final``: its ``lseq`` is above 0) closes the
    linked progressive at this table."""
    return code in (CLOSING_FINAL if final else CLOSING_UNCONSUMED)


def closure_reason(code: str) -> str:
    """The ``table_closed`` reason (and the words on the signs) for a refusal ``code``."""
    return f"{LINK_REFUSED}{code}"


def refused_code(closed: frozenset[str]) -> str | None:
    """The code of the link refusal that closes the linked progressive, or ``None``."""
    found = sorted(r for r in closed if r.startswith(LINK_REFUSED))
    return found[0].removeprefix(LINK_REFUSED) if found else None


class RefusalLog:
    """The table's error lines for the link's refusals, and the link's words for each code
    that closed the linked progressive (for ``status``; this run's only)."""

    def __init__(self, link_id: str, meters: Mapping[str, str]) -> None:
        self.link_id = link_id
        self.meters = dict(meters)  # table meter id -> the link's
        self.reasons: dict[str, str] = {}
        self._log = RateLimitedLog(1, REFUSED_LOG_EVERY_S, logger=log)  # per (code, closing)

    def say(self, result: Result, *, closing: bool) -> None:
        """One error line per code and minute: a message refused without consuming its
        sequence is sent again, and refused again, until someone acts."""
        if closing:
            self.reasons[result.code] = result.reason
        what = (
            "the link refused a message and resending cannot help: the linked progressive "
            f"is closed at this table; {advice(result.code)}"
            if closing
            else "the link refused a message without consuming its sequence: the table's "
            "ledger and the link's disagree; reconcile them"
        )
        self._log.error(
            what,
            per=(result.code, closing),
            link=self.link_id,
            seq=result.seq,
            id=result.id,
            code=result.code,
            reason=result.reason,
            final=result.lseq > 0,
            meters=self.meters,
        )
