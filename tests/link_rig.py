"""A link ledger and member tables' ledgers, driven through the pure book (real SQLite files).

Each :class:`Site` is a table's real ledger (:class:`progressived.ledger.Ledger`) that
journals ``link_sent`` and ``link_result`` rows as docs/link.md asks of the table side, its
messages carrying its real ledger head; :class:`Rig` delivers them to a real
:class:`~progressived.link.store.ledger.LinkLedger` by group commits and hands the results back.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from progressived.ledger import Ledger, chain
from progressived.link.core import book
from progressived.link.core.messages import (
    Claim,
    ClaimConfirm,
    ClaimReject,
    Contribution,
    LedgerHead,
    MeterWagers,
    Result,
    Reversal,
    TableMessage,
    encode,
    to_dict,
)
from progressived.link.core.state import Step
from progressived.link.store.ledger import LinkLedger
from tests import helpers
from tests.link_sim import METER, WAGER, link_params

AT = "2026-11-23T17:00:00Z"


class Site:
    """A member table: its real ledger, its sequence, the link rows it journals."""

    def __init__(self, folder: Path, table: str, link: str) -> None:
        self.table, self.link = table, link
        self.path = folder / f"{table}.db"
        params = dataclasses.replace(helpers.table(), table_id=table)
        self.ledger = Ledger.open(self.path, params, at=AT)
        self.seq = 0
        self.claims: list[str] = []
        self.contributions: list[str] = []

    def _make(self, cls: type[TableMessage], **fields: Any) -> TableMessage:
        self.seq += 1
        head = LedgerHead(self.ledger.head_seq, self.ledger.head_hash)
        return cls(
            table=self.table,
            seq=self.seq,
            id=f"{self.table}:{self.seq}",
            head=head,
            at=AT,
            **fields,
        )

    def journal_sent(self, msg: TableMessage, message: dict[str, Any] | None = None) -> None:
        data = {
            "link": self.link,
            "seq": msg.seq,
            "id": msg.id,
            "type": msg.type,
            "message": to_dict(msg) if message is None else message,
        }
        self.ledger.record("link_sent", data, at=AT, round=getattr(msg, "round", None))

    def send(self, cls: type[TableMessage], *, journal: bool = True, **fields: Any) -> TableMessage:
        msg = self._make(cls, **fields)
        if journal:
            self.journal_sent(msg)
        return msg

    def contribute(self, count: int, **kw: Any) -> TableMessage:
        wagers = (MeterWagers(METER, count, count * WAGER),)
        msg = self.send(Contribution, round=1, wagers=wagers, **kw)
        self.contributions.append(msg.id)
        return msg

    def claim(self, hand: str = "royal-flush", **kw: Any) -> TableMessage:
        claim_id = f"{self.table}-c{self.seq + 1}"
        self.claims.append(claim_id)
        return self.send(Claim, claim=claim_id, round=1, seat=2, hand=hand, meter=METER, **kw)

    def confirm(self, claim_id: str) -> TableMessage:
        return self.send(ClaimConfirm, claim=claim_id, by="sup")

    def reject(self, claim_id: str) -> TableMessage:
        return self.send(ClaimReject, claim=claim_id, by="sup")

    def reverse(self, of: str) -> TableMessage:
        return self.send(Reversal, of=of, round=1)

    def on_result(self, result: Result) -> None:
        if result.status == "resend" or result.seq in self.journaled():
            return
        data = {
            "link": self.link,
            "seq": result.seq,
            "id": result.id,
            "status": result.status,
            "code": result.code,
            "result": to_dict(result),
        }
        self.ledger.record("link_result", data, at=AT)

    def journaled(self) -> set[int]:
        conn = sqlite3.connect(self.path)
        try:
            rows = conn.execute(
                "SELECT json_extract(data, '$.seq') FROM journal WHERE kind = 'link_result'"
            ).fetchall()
        finally:
            conn.close()
        return {int(s) for (s,) in rows}


class Rig:
    """The link ledger plus sites; :meth:`deliver` is one group commit."""

    def __init__(self, folder: Path, tables: int = 2) -> None:
        self.params = link_params(tables)
        self.link_path = folder / "link.db"
        LinkLedger.create(self.link_path, self.params, at=AT, software="test")
        self.link = LinkLedger.open(self.link_path, self.params, at=AT)
        self.sites = {
            f"t{i}": Site(folder, f"t{i}", self.params.link_id) for i in range(1, tables + 1)
        }
        self.now_ms = 1_700_000_000_000

    def deliver(self, msgs: Sequence[TableMessage], *, answer: bool = True) -> list[Step]:
        steps: list[tuple[Step, int]] = []
        state = self.link.book
        for msg in msgs:
            self.now_ms += 7
            step = book.receive(
                self.params,
                state,
                encode(msg),
                topic_table=msg.table,
                at_ms=self.now_ms,
                head=self.link.head,
            )
            steps.append((step, self.now_ms))
            state = step.state
        self.link.commit(steps)
        if answer:
            for step, _ in steps:
                for reply in step.replies:
                    if isinstance(reply, Result) and reply.table in self.sites:
                        self.sites[reply.table].on_result(reply)
        return [s for s, _ in steps]

    def play(self) -> None:
        """Contributions from both tables, a claim and its confirm, a voided round."""
        t1, t2 = self.sites["t1"], self.sites["t2"]
        self.deliver([t1.contribute(3), t2.contribute(2), t1.contribute(4)])
        void = t2.contribute(5)
        self.deliver([void, t2.claim()])
        self.deliver([t2.confirm(t2.claims[0]), t2.reverse(void.id), t1.contribute(1)])
        self.deliver([t1.claim("straight-flush")])
        self.deliver([t1.reject(t1.claims[0])])

    def close(self) -> None:
        self.link.close()
        for site in self.sites.values():
            site.ledger.close()

    def table_paths(self) -> list[Path]:
        return [s.path for s in self.sites.values()]


# -- tampering, as someone with write access to the file would ------------------------------


def untriggered(db: Path) -> sqlite3.Connection:
    """A connection of someone who dropped the append-only triggers."""
    c = sqlite3.connect(db, isolation_level=None)
    for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        c.execute(f"DROP TRIGGER {name}")
    return c


def rehash_from(c: sqlite3.Connection, first: int) -> None:
    """Rewrite the chain consistently from row ``first`` on, and ``meta``'s head."""
    prev = c.execute("SELECT hash FROM journal WHERE seq = ?", (first - 1,)).fetchone()
    prev_hash = chain.GENESIS if prev is None else str(prev[0])
    text_sql = chain.ROWS_SQL.replace("prev_hash || '|' ||", "", 1)
    for seq, _, _, text in c.execute(text_sql, (first - 1, 1 << 62)).fetchall():
        new = chain.link(prev_hash, text)
        c.execute("UPDATE journal SET prev_hash = ?, hash = ? WHERE seq = ?", (prev_hash, new, seq))
        prev_hash = new
    head = c.execute("SELECT max(seq) FROM journal").fetchone()[0]
    c.execute("UPDATE meta SET value = ? WHERE key = 'head_seq'", (str(head),))
    c.execute("UPDATE meta SET value = ? WHERE key = 'head_hash'", (prev_hash,))
    c.execute(
        "UPDATE snapshots SET hash = (SELECT hash FROM journal j WHERE j.seq = snapshots.seq)"
    )
