"""A stand-in for the link ledger (progressived/link/store/ledger.py, built separately) in memory.

It keeps the :class:`progressived.link.core.ports.LinkJournal` contract the controller relies
on: one ``commit`` per batch, all or nothing (``fail`` makes it raise LedgerUnavailable
and change nothing), ``book`` and ``head`` as of the last commit, a hash-chained row per
journaled event. Only tests use it; the real ledger replaces it on merge.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from progressived.ledger import LedgerUnavailable
from progressived.link.core import book
from progressived.link.core import params as lp
from progressived.link.core.messages import LedgerHead, to_dict
from progressived.link.core.state import Applied, BookState, Step

GENESIS = "0" * 64


@dataclass
class MemoryJournal:
    params: lp.LinkParams
    book: BookState = field(init=False)
    head: LedgerHead = field(default_factory=lambda: LedgerHead(0, GENESIS))
    rows: list[tuple[str, dict[str, object], int]] = field(default_factory=list)
    commits: int = 0
    fail: bool = False
    closed: bool = False

    def __post_init__(self) -> None:
        self.book = book.open_book(self.params)

    def renew(self) -> None:
        """No lease in memory (the port's renew is a no-op without one)."""

    def file_problem(self) -> str | None:
        """No file in memory."""
        return None

    def save_copy(self, target: str) -> None:
        raise LedgerUnavailable("stub ledger: in memory")

    def commit(self, steps: Sequence[tuple[Step, int]]) -> None:
        if self.fail:
            raise LedgerUnavailable("stub ledger: disk full")
        rows: list[tuple[str, dict[str, object], int]] = []
        for step, at_ms in steps:
            for event in step.events:
                if isinstance(event, Applied):
                    data: dict[str, object] = {
                        "lseq": event.lseq,
                        "table": event.table,
                        "seq": event.seq,
                        "result": to_dict(event.result),
                        "postings": [[p.account, p.units] for p in event.postings],
                    }
                else:
                    data = {"table": event.table, "seq": event.seq, "code": event.code}
                rows.append((event.kind, data, at_ms))
        seq, digest = self.head.seq, self.head.hash
        for kind, data, _ in rows:
            seq += 1
            digest = hashlib.sha256(f"{digest}{seq}{kind}{data}".encode()).hexdigest()
        self.rows += rows
        self.commits += 1
        if steps:
            self.book = steps[-1][0].state
        self.head = LedgerHead(seq, digest)

    def close(self) -> None:
        self.closed = True

    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.rows]
