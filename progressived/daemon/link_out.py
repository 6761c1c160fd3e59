"""The table's side of the link protocol, without I/O: messages out, results in.

:class:`LinkOutbox` turns the events of one journaled decision into the messages the link
must get (docs/link.md, "Table side"): one ``contribution`` per LOCK (per linked meter the
count and units of the wagers locked), a ``claim`` per claim on a linked meter the round
asked the meter for, a ``claim_confirm`` per CONFIRM of a linked award, a ``claim_reject``
per linked award reversed (REJECT, a second press, a reprice: a repriced claim is a reject
plus a new claim), a ``reversal`` when a round whose contribution was sent is voided. Each
message gets the next gapless sequence, the id ``<table>:<seq>``, the table ledger's head,
a ``link_sent`` row and a ``link_outbox`` row, all in the decision's transaction.

A final result (applied or refused) becomes a ``link_result`` row, the deletion of its
outbox row and, for a claim or a confirmation, the engine's ``MeterAnswered`` (the award
priced by the link, paid at the confirm's amount, or ``claim_refused``).

A linked meter has two ids: the table's (what its paytable's percentage pays name, in its
events and its ledger) and the link's (``link_meter``, in every message to the link); the
outbox turns one into the other both ways.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from progressived.core.params import TableParams
from progressived.engine.events import (
    AwardConfirmed,
    AwardKeyed,
    AwardReversed,
    Event,
    RoundLocked,
    RoundVoided,
    WagerLocked,
)
from progressived.engine.meter_port import (
    ClaimRefused,
    MeterAnswered,
    MeterRequested,
    PostAward,
    ReserveAwards,
)
from progressived.engine.state import TableState
from progressived.ledger.link_outbox import LinkMessageRow, LinkOutboxChange, QueueLinkMessage
from progressived.ledger.rows import Record
from progressived.link.core import messages as lm

_NOT_ID = re.compile(r"[^A-Za-z0-9_.:-]")


def _by(actor: str) -> str:
    """An actor as a protocol id (``by``)."""
    cleaned = _NOT_ID.sub("-", actor).lstrip("_.:-")[:64]
    return cleaned or "table"


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """What the table sent a claim for (its id names it in confirms and rejects)."""

    round: int
    seat: int
    hand: str
    meter: str


@dataclass
class Outgoing:
    """The messages one decision makes: rows for its transaction, then the outbox's update."""

    records: list[Record] = field(default_factory=list)
    changes: list[LinkOutboxChange] = field(default_factory=list)
    next_seq: int = 0
    claims: dict[str, ClaimRef] = field(default_factory=dict)
    contributions: dict[int, str] = field(default_factory=dict)


class LinkOutbox:
    """The link outbox's sequencer: sequences, claim ids and the contribution of each
    round, rebuilt from the ledger (not a *book*: that word is the engine's meter book and
    the link controller's book)."""

    def __init__(self, params: TableParams, link_id: str, prefix: str) -> None:
        self.params = params
        self.link_id = link_id
        self.table = params.table_id
        self.topic = lm.from_table_topic(prefix, link_id, self.table)
        self.next_seq = 1
        self.claims: dict[str, ClaimRef] = {}  # claim id -> what it claims
        self.by_hand: dict[tuple[int, int, str], str] = {}  # (round, seat, hand) -> claim id
        self.contributions: dict[int, str] = {}  # round -> its contribution's message id
        self.at_link = params.link_meter_ids()  # table meter id -> the link's id for it
        self.from_link = {v: k for k, v in self.at_link.items()}

    # ------------------------------------------------------------- recovery
    def load(self, sent: Sequence[dict[str, Any]]) -> None:
        """Rebuild from the ``link_sent`` rows' data, in journal order."""
        for data in sent:
            self.next_seq = max(self.next_seq, int(data["seq"]) + 1)
            self._remember(data["message"])

    def _remember(self, message: dict[str, Any]) -> None:
        if message["type"] == "claim":
            meter = self.from_link.get(message["meter"], message["meter"])
            ref = ClaimRef(message["round"], message["seat"], message["hand"], meter)
            self.claims[message["claim"]] = ref
            self.by_hand[(ref.round, ref.seat, ref.hand)] = message["claim"]
        elif message["type"] == "contribution":
            self.contributions[int(message["round"])] = str(message["id"])

    # ------------------------------------------------------------- messages out
    def outgoing(
        self,
        before: TableState,
        after: TableState,
        events: Sequence[Event],
        actor: str,
        at: str,
        head: tuple[int, str],
    ) -> Outgoing:
        """The messages ``events`` (one decision, ``before`` -> ``after``) send the link."""
        out = Outgoing(next_seq=self.next_seq)
        linked = self.params.linked_meters
        stamp = lm.LedgerHead(seq=head[0], hash=head[1])
        env: dict[str, Any] = {"table": self.table, "head": stamp, "at": at[:40]}
        wagers = [e for e in events if isinstance(e, WagerLocked)]
        for event in events:
            seq = out.next_seq
            ident = f"{self.table}:{seq}"
            msg: lm.TableMessage | None = None
            if isinstance(event, RoundLocked) and not after.linked_off and wagers:
                units = sum(w.units for w in wagers)
                msg = lm.Contribution(
                    **env, seq=seq, id=ident, round=event.round,
                    wagers=tuple(
                        lm.MeterWagers(meter=self.at_link[m], count=len(wagers), units=units)
                        for m in sorted(linked)
                    ),
                )  # fmt: skip
                out.contributions[event.round] = ident
            elif isinstance(event, MeterRequested):
                msg = self._request(event, out, env, seq, ident, actor)
            elif isinstance(event, AwardReversed) and event.meter in linked:
                claim = self._claim_of(event.round, event.seat, event.hand, out)
                if claim is not None:
                    msg = lm.ClaimReject(**env, seq=seq, id=ident, claim=claim, by=_by(actor))
            elif isinstance(event, RoundVoided):
                of = out.contributions.get(event.round) or self.contributions.get(event.round)
                if of is not None:
                    msg = lm.Reversal(**env, seq=seq, id=ident, of=of, round=event.round)
            if msg is None:
                continue
            self._add(out, msg, event.round, event.seat, at, actor)
        return out

    def _request(
        self,
        event: MeterRequested,
        out: Outgoing,
        env: dict[str, Any],
        seq: int,
        ident: str,
        actor: str,
    ) -> lm.TableMessage | None:
        request, linked = event.request, self.params.linked_meters
        if isinstance(request, ReserveAwards):
            # A group on a linked meter: one claim each, in the round's order (the link's
            # policy then sequences or shares them); added here, nothing returned.
            for c in request.claims:
                if c.meter not in linked:
                    continue
                s = out.next_seq
                cid = f"r{request.round}-s{c.seat}-{s}"
                msg = lm.Claim(
                    **env, seq=s, id=f"{self.table}:{s}", claim=cid, round=request.round,
                    seat=c.seat, hand=c.hand, meter=self.at_link[c.meter],
                )  # fmt: skip
                out.claims[cid] = ClaimRef(request.round, c.seat, c.hand, c.meter)
                self._add(out, msg, request.round, c.seat, str(env["at"]), actor)
            return None
        if isinstance(request, PostAward) and request.award.meter in linked:
            a = request.award
            claim = self._claim_of(request.round, a.seat, a.hand, out)
            if claim is not None:
                return lm.ClaimConfirm(**env, seq=seq, id=ident, claim=claim, by=_by(actor))
        return None

    def _claim_of(self, round_no: int, seat: int, hand: str, out: Outgoing) -> str | None:
        for cid, ref in reversed(out.claims.items()):
            if (ref.round, ref.seat, ref.hand) == (round_no, seat, hand):
                return cid
        return self.by_hand.get((round_no, seat, hand))

    def _add(
        self, out: Outgoing, msg: lm.TableMessage, round_no: int, seat: int, at: str, actor: str
    ) -> None:
        payload = lm.encode(msg).decode()
        detail = {
            "link": self.link_id,
            "seq": msg.seq,
            "id": msg.id,
            "type": msg.type,
            "message": json.loads(payload),
        }
        out.records.append(
            Record(
                kind="link_sent",
                detail=detail,
                at=at,
                actor=actor or "system",
                round=round_no,
                seat=seat,
            )
        )
        row = LinkMessageRow(msg.seq, msg.id, msg.type, self.topic, payload)
        out.changes.append(QueueLinkMessage(row))
        out.next_seq = max(out.next_seq, msg.seq + 1)

    def committed(self, out: Outgoing) -> None:
        """The decision's transaction committed: its messages are the outbox's."""
        self.next_seq = out.next_seq
        for record in out.records:
            self._remember(dict(record.detail["message"]))

    # ------------------------------------------------------------- results in
    def answer(
        self, state: TableState, message: dict[str, Any], result: lm.Result, at: str
    ) -> MeterAnswered | None:
        """The engine's answer a final result brings (``None`` when the round awaits none)."""
        kind = message["type"]
        if kind == "claim":
            ref = self.claims.get(message["claim"])
            request = _awaiting_reserve(state, message)
            if ref is None or request is None:
                return None
            if result.status != "applied":
                return _refused(ref, result, at)
            award = _award(result, message["claim"])
            if award is None:
                return None
            index = [(c.seat, c.hand) for c in request.claims].index((ref.seat, ref.hand))
            keyed = AwardKeyed(
                at=at, round=ref.round, seat=ref.seat, hand=ref.hand, meter=ref.meter,
                units=award.units, meter_before=award.units, meter_after=0, reset_reserve=0,
                reset_seed=0, order=request.first_order + index, share_of=award.share_of,
            )  # fmt: skip
            return MeterAnswered(events=(keyed,), at=at, actor="link")
        if kind == "claim_confirm":
            ref = self.claims.get(message["claim"])
            if ref is None or not _awaiting_post(state, ref):
                return None
            if result.status != "applied":
                return _refused(ref, result, at)
            award = _award(result, message["claim"])
            if award is None:
                return None
            paid = AwardConfirmed(
                at=at, round=ref.round, seat=ref.seat, hand=ref.hand, meter=ref.meter,
                units=award.units, by=str(message["by"]),
            )  # fmt: skip
            return MeterAnswered(events=(paid,), at=at, actor="link")
        return None


def _award(result: lm.Result, claim: str) -> lm.Award | None:
    return next((a for a in result.awards if a.claim == claim), None)


def _awaiting_reserve(state: TableState, message: dict[str, Any]) -> ReserveAwards | None:
    if state.round != message["round"]:
        return None
    for request in state.awaiting:
        if isinstance(request, ReserveAwards) and any(
            (c.seat, c.hand) == (message["seat"], message["hand"]) for c in request.claims
        ):
            return request
    return None


def _awaiting_post(state: TableState, ref: ClaimRef) -> bool:
    return state.round == ref.round and any(
        isinstance(r, PostAward) and (r.award.seat, r.award.hand) == (ref.seat, ref.hand)
        for r in state.awaiting
    )


def result_record(link_id: str, result: lm.Result, message_type: str, at: str) -> Record:
    """The ``link_result`` row of a final result (the link's head in it: witnessed)."""
    detail = {
        "link": link_id,
        "seq": result.seq,
        "id": result.id,
        "type": message_type,
        "status": result.status,
        "code": result.code,
        "result": lm.to_dict(result),
    }
    return Record(kind="link_result", detail=detail, at=at, actor="link")


def _refused(ref: ClaimRef, result: lm.Result, at: str) -> MeterAnswered:
    """The link refused a claim or its confirmation: the claim leaves the round."""
    refused = ClaimRefused(
        at=at, round=ref.round, seat=ref.seat, hand=ref.hand, meter=ref.meter,
        code=result.code, reason=result.reason[:200],
    )  # fmt: skip
    return MeterAnswered(events=(refused,), at=at, actor="link")
