"""What the link controller has handled: messages by outcome, batches, and when each member
table was last heard (the status's ``messages``, ``batches``, ``tables`` → ``heard_s_ago``;
the ``tables_heard`` gauge).

Written only on the event loop, after each batch; the status and the metrics read a copy in
the controller's snapshot (:mod:`progressived.link.runtime.snapshot`), never this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

OUTCOMES = ("applied", "refused", "resend", "duplicate")


class Traffic:
    """Counts since the process started; ``heard`` for the term being served."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        self.batches = 0
        self.heard: dict[str, float] = {}  # member table -> monotonic time last heard

    def batch(self, counts: Mapping[str, int], tables: Iterable[str], now: float) -> None:
        """One batch handled: its outcomes counted, its senders (members only) heard."""
        self.batches += 1
        for key, n in counts.items():
            self.counts[key] = self.counts.get(key, 0) + n
        for table in tables:
            self.heard[table] = now

    def stood_down(self) -> None:
        """A standby hears no table."""
        self.heard.clear()
