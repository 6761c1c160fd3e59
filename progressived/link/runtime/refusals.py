"""Refusals that consumed no sequence: counted per table and code, logged at most 10 lines a
minute, answered within a budget per table -- never a ledger row each.

Why: such a refusal changes nothing (no sequence, no money), yet one hostile or broken
account can send thousands a second. Journaling each (a ``link_refused`` row: 20,000 rows
and 10 MB for 20 s of junk) and answering each (the outbox growing behind the flood,
heartbeats late) let one account cost the ledger and every other table. Now (docs/link.md,
"Refusals"):

* each is counted: ``by_table[(table, code)]`` (a non-member's under :data:`NOT_A_MEMBER`,
  so no name a sender makes up becomes a metric label), ``progressive_link_refusals_total``;
* the log gets at most 10 lines a minute (:class:`RateLimitedLog`, the number held back
  told with the next line);
* the answer a table is owed (a ``result`` with ``lseq`` 0: this refusal, or a ``resend``)
  is sent while the table's budget lasts -- ``ANSWER_BURST`` at once, ``ANSWERS_PER_S`` a
  second after that -- and dropped (counted: ``answers_dropped``) beyond it. Only the
  flooding account loses answers: each answer goes to the topic of the table that sent the
  refused message. A table whose message was refused sends it again from its outbox, so
  it still learns the code.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable

from progressived.link.core.batch import Outcome, Publication
from progressived.link.runtime.ratelimit import RateLimitedLog

NOT_A_MEMBER = "(not a member)"  # the table label of every account not in [link] tables
ANSWER_BURST = 20  # refusal answers a table may get at once
ANSWERS_PER_S = 10.0  # and then per second


class Refusals:
    """Counts, a rate-limited log and per-table answer budgets (see the module)."""

    def __init__(
        self,
        members: Iterable[str],
        *,
        burst: int = ANSWER_BURST,
        per_s: float = ANSWERS_PER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.members = frozenset(members)
        self.burst, self.per_s, self.clock = burst, per_s, clock
        self.by_table: Counter[tuple[str, str]] = Counter()  # (table label, code)
        self.unreadable: Counter[str] = Counter()  # payloads the decoder refused, by code
        self.answers_dropped: Counter[str] = Counter()  # per table label
        self.log = RateLimitedLog()
        self._tokens: dict[str, tuple[float, float]] = {}  # label -> (tokens, as of)

    def label(self, table: str) -> str:
        return table if table in self.members else NOT_A_MEMBER

    def note(self, outcome: Outcome) -> None:
        """Count and log a batch's refusals (final ones are journaled with their message:
        they are only logged here)."""
        for r in outcome.refusals:
            self.by_table[(self.label(r.table), r.code)] += 1
            if r.seq == 0:  # not a message of the protocol: no sequence to name
                self.unreadable[r.code] += 1
            self.log.warning(
                "message refused", table=r.table, seq=r.seq, code=r.code, reason=r.reason
            )
        for a in outcome.final_refusals:
            self.log.warning(
                "message refused (sequence consumed)",
                table=a.table,
                seq=a.seq,
                code=a.result.code,
                reason=a.result.reason,
            )

    def answers(self, replies: list[Publication]) -> list[Publication]:
        """``replies`` without the refusal answers over their table's budget (in order)."""
        if not any(r.non_final_to for r in replies):
            return replies
        now = self.clock()
        kept: list[Publication] = []
        for reply in replies:
            if reply.non_final_to and not self._spend(self.label(reply.non_final_to), now):
                self.answers_dropped[self.label(reply.non_final_to)] += 1
                continue
            kept.append(reply)
        return kept

    def _spend(self, label: str, now: float) -> bool:
        tokens, since = self._tokens.get(label, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - since) * self.per_s)
        if tokens < 1.0:
            self._tokens[label] = (tokens, now)
            return False
        self._tokens[label] = (tokens - 1.0, now)
        return True
