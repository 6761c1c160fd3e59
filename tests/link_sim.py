"""Simulated member tables for the link book: an outbox, retransmission, journaled results.

A table here keeps what docs/link.md asks of the real table-side adapter: messages get
gapless sequences and ledger heads when they are made; a message leaves the outbox only
when the link's result for it (applied or refused) is received, never on transmission; a
"resend from N" answer makes it send its outbox again from N.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from fractions import Fraction

from progressived.core.money import UNITS_PER_DOLLAR
from progressived.core.params import Policy
from progressived.link.core import book
from progressived.link.core import params as lp
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
)
from progressived.link.core.state import BookState, Step

METER = "pmg"
WAGER = UNITS_PER_DOLLAR
SEED = 1_000 * UNITS_PER_DOLLAR
LINK_HEAD = LedgerHead(7, "c" * 64)


def link_params(
    tables: int = 3,
    policy: Policy = Policy.SEQUENTIAL,
    window_ms: int = 2_000,
    keep_results: int = 1024,
    limit: int | None = None,
) -> lp.LinkParams:
    spec = lp.MeterSpec(
        METER,
        seed=SEED,
        rate=Fraction(3, 100),
        reserve_rate=Fraction(1, 200),
        limit=limit,
        hands={"royal-flush": Fraction(1), "straight-flush": Fraction(1, 10)},
    )
    return lp.LinkParams(
        "link-a",
        (spec,),
        frozenset(f"t{i}" for i in range(1, tables + 1)),
        policy=policy,
        split_window_ms=window_ms,
        keep_results=keep_results,
    )


def head_of(table: str, seq: int) -> LedgerHead:
    return LedgerHead(seq, hashlib.sha256(f"{table}:{seq}".encode()).hexdigest())


@dataclass
class SimTable:
    """One member table: makes messages, keeps an outbox, journals the link's results."""

    table: str
    seq: int = 0
    outbox: dict[int, TableMessage] = field(default_factory=dict)
    results: dict[int, list[Result]] = field(default_factory=dict)
    sent: list[TableMessage] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    contributions: list[str] = field(default_factory=list)

    def _envelope(self) -> dict[str, object]:
        self.seq += 1
        return {
            "table": self.table,
            "seq": self.seq,
            "id": f"{self.table}-{self.seq}",
            "head": head_of(self.table, self.seq),
            "at": "2026-11-23T17:00:00Z",
        }

    def _queue(self, msg: TableMessage) -> TableMessage:
        self.outbox[msg.seq] = msg
        self.sent.append(msg)
        return msg

    def contribute(self, count: int, round_no: int = 1) -> TableMessage:
        msg = Contribution(
            **self._envelope(),
            round=round_no,
            wagers=(MeterWagers(METER, count, count * WAGER),),
        )
        self.contributions.append(msg.id)
        return self._queue(msg)

    def claim(self, hand: str = "royal-flush", seat: int = 1) -> TableMessage:
        claim_id = f"{self.table}-c{self.seq + 1}"
        self.claims.append(claim_id)
        msg = Claim(
            **self._envelope(),
            claim=claim_id,
            round=1,
            seat=seat,
            hand=hand,
            meter=METER,
        )
        return self._queue(msg)

    def confirm(self, claim_id: str) -> TableMessage:
        return self._queue(ClaimConfirm(**self._envelope(), claim=claim_id, by="sup"))

    def reject(self, claim_id: str) -> TableMessage:
        return self._queue(ClaimReject(**self._envelope(), claim=claim_id, by="sup"))

    def reverse(self, of: str) -> TableMessage:
        return self._queue(Reversal(**self._envelope(), of=of, round=1))

    def on_reply(self, reply: object) -> list[TableMessage]:
        """Journal a result; a resend answer returns the messages to send again."""
        if not isinstance(reply, Result) or reply.table != self.table:
            return []
        if reply.status == "resend":
            return [self.outbox[s] for s in sorted(self.outbox) if s >= reply.resend_from]
        if reply.code in ("forged", "unknown-table", "too-old", "conflict", "bad-json"):
            return []
        self.results.setdefault(reply.seq, []).append(reply)
        self.outbox.pop(reply.seq, None)
        return []


def deliver(params: lp.LinkParams, state: BookState, msg: TableMessage, at_ms: int = 0) -> Step:
    """Hand one message to the book as the adapter would (bytes, from the sender's topic)."""
    from progressived.link.core.messages import encode

    return book.receive(
        params, state, encode(msg), topic_table=msg.table, at_ms=at_ms, head=LINK_HEAD
    )
