"""The link book's state and events (pure data).

The state is replaced, never mutated: :func:`progressived.link.core.book.receive` returns a new
one. It is rebuilt after a restart by replaying the journaled inputs (each message with the
link's receive time), because the book is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from progressived.engine.events import Posting
from progressived.link.core.messages import Award, AwardUpdate, Hit, LedgerHead, Result
from progressived.link.core.models import AwardState

Postings = tuple[Posting, ...]
ClaimKey = tuple[str, str]  # (table, claim id)


@dataclass(frozen=True, slots=True)
class Stored:
    """The SHA-256 of a table message's canonical bytes and the result it got (a repeat with
    the same digest gets it again; another digest under the same sequence is a conflict).
    The digest, not the bytes: 50 tables x ``keep_results`` of them stay in memory."""

    digest: bytes
    result: Result


@dataclass(frozen=True, slots=True)
class TableTrack:
    """Per table: the high-water mark, the last witnessed ledger head, recent results."""

    hwm: int = 0
    head: LedgerHead | None = None
    results: Mapping[int, Stored] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClaimState:
    """A claim: which group priced it, its current share and where it stands."""

    table: str
    claim: str
    meter: str
    hand: str
    seat: int
    group: int
    units: int
    order: int
    state: AwardState  # pending | paid | rejected

    def award(self, share_of: int) -> Award:
        return Award(
            claim=self.claim,
            meter=self.meter,
            hand=self.hand,
            units=self.units,
            order=self.order,
            share_of=share_of,
            state=self.state,
        )


@dataclass(frozen=True, slots=True)
class Group:
    """One priced award (split policy: shared by its members), frozen at log position ``id``.

    ``reset_reserve`` and ``reset_seed`` are what a 100% award moved into the meter, so a
    rejection can give them back exactly.
    """

    id: int
    meter: str
    hand: str
    total: int  # units still held for the group's pending and paid members
    opened_ms: int
    members: tuple[ClaimKey, ...]
    reset_reserve: int = 0
    reset_seed: int = 0
    final: bool = False  # a member was paid: shares are fixed, no one joins


@dataclass(frozen=True, slots=True)
class Contributed:
    """A contribution's postings, kept so a voided round can be reversed once."""

    round: int
    postings: Postings
    reversed: bool = False


@dataclass(frozen=True, slots=True)
class BookState:
    lseq: int = 0  # the link's log position: one per message that consumed a sequence
    balances: Mapping[str, int] = field(default_factory=dict)
    tables: Mapping[str, TableTrack] = field(default_factory=dict)
    claims: Mapping[ClaimKey, ClaimState] = field(default_factory=dict)
    groups: Mapping[int, Group] = field(default_factory=dict)
    # per table, the last ``keep_results`` contributions by message id (reversible)
    contributions: Mapping[str, Mapping[str, Contributed]] = field(default_factory=dict)
    epochs: Mapping[str, int] = field(default_factory=dict)
    hits: Mapping[str, Hit] = field(default_factory=dict)


# -- events: what the adapter journals, in the same transaction as the new state ---------


@dataclass(frozen=True, slots=True, kw_only=True)
class Applied:
    """A table message consumed its sequence (applied, or refused on its content)."""

    kind = "link_applied"
    lseq: int
    table: str
    seq: int
    id: str
    head: LedgerHead  # the table ledger head it carried: the link witnesses it
    message: bytes
    postings: Postings
    result: Result


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkRefused:
    """A message the link refused without consuming a sequence: nothing changed (the
    ``link_refused`` event; a refusal that consumed one is an :class:`Applied` whose
    result is refused)."""

    kind = "link_refused"
    table: str
    seq: int
    code: str
    reason: str


LinkEvent = Applied | LinkRefused


@dataclass(frozen=True, slots=True)
class Step:
    """What one input did: the new state, events to journal, messages to send."""

    state: BookState
    events: tuple[LinkEvent, ...]
    replies: tuple[Result | AwardUpdate, ...]
