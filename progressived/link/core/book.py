"""The pure linked-meter book: table messages in, events and replies out.

``receive`` applies one table message to the book. It holds the exactly-once rules:

* each table's messages are applied strictly in sequence order (a high-water mark per table);
* a repeat (same sequence, same bytes) gets its stored result and changes nothing;
* a gap (a sequence beyond the next) gets a "resend from N" answer and changes nothing;
* a bad payload, a forged sender, an unknown table, a sequence older than the stored
  results, a different message under a used sequence, or a ledger head that went backwards
  is refused without consuming the sequence and changes nothing;
* a well-formed message in sequence that the link cannot act on (an unknown meter or hand,
  a claim already paid) consumes its sequence with a stored "refused" result (a final
  answer the table can journal) and changes no money.

The adapter must journal each :class:`~progressived.link.core.state.Applied` event and the new
high-water mark in the same transaction as its postings, and send the replies only after
that commit. No I/O, no clock: the receive time comes in with the message.

Micro-benchmark: ``python -m bench.link_budget --floors`` (one contribution decoded, and
booked, alone: the floors of the link's decode and book stages; docs/performance.md,
"Micro-benchmarks").
"""

from __future__ import annotations

from collections.abc import Mapping
from hashlib import sha256

from progressived.engine import accounts
from progressived.link.core import effects
from progressived.link.core import params as lp
from progressived.link.core.messages import (
    MAX_REASON,
    Award,
    AwardUpdate,
    Claim,
    ClaimConfirm,
    ClaimReject,
    Contribution,
    Heartbeat,
    LedgerHead,
    LinkedMeter,
    MessageError,
    Result,
    Reversal,
    TableMessage,
    decode_table,
    encode,
)
from progressived.link.core.state import (
    Applied,
    BookState,
    ClaimKey,
    ClaimState,
    Group,
    LinkRefused,
    Step,
    Stored,
    TableTrack,
)

_EFFECTS = {
    Contribution.type: effects.contribute,
    Claim.type: effects.claim,
    ClaimConfirm.type: effects.confirm,
    ClaimReject.type: effects.reject,
    Reversal.type: effects.reverse,
}


def open_book(params: lp.LinkParams) -> BookState:
    """A new link book: every linked meter funded with its seed (seed funding)."""
    lp.validate(params)
    balances: dict[str, int] = {}
    for spec in params.meters:
        balances[accounts.seed_funding(spec.id)] = -spec.seed
        balances[accounts.meter(spec.id)] = spec.seed
    return BookState(balances=balances, epochs={m.id: 0 for m in params.meters})


def receive(
    params: lp.LinkParams,
    state: BookState,
    payload: bytes | str | TableMessage,
    *,
    topic_table: str | None,
    at_ms: int,
    head: LedgerHead,
) -> Step:
    """Apply one message that arrived on ``topic_table``'s topic at the link's ``at_ms``.

    ``head`` is the link ledger's head as last committed; every reply carries it.
    """
    try:
        msg = payload if isinstance(payload, TableMessage) else decode_table(payload)
    except MessageError as exc:
        return _refuse(params, state, topic_table, 0, "none", exc.code, exc.reason, head)
    table = msg.table
    if topic_table is not None and topic_table != table:
        why = f"a message for table {table} arrived on table {topic_table}'s topic"
        return _refuse(params, state, topic_table, msg.seq, msg.id, "forged", why, head)
    if table not in params.tables:
        why = f"table {table} is not a member of link {params.link_id}"
        return _refuse(params, state, table, msg.seq, msg.id, "unknown-table", why, head)
    track = state.tables.get(table, TableTrack())
    raw = encode(msg)
    if msg.seq <= track.hwm:
        stored = track.results.get(msg.seq)
        if stored is None:
            why = f"sequence {msg.seq} is older than the results kept (high-water {track.hwm})"
            return _refuse(params, state, table, msg.seq, msg.id, "too-old", why, head)
        if stored.digest != sha256(raw).digest():
            why = f"sequence {msg.seq} was used by a different message"
            return _refuse(params, state, table, msg.seq, msg.id, "conflict", why, head)
        return Step(state, (), (stored.result,))
    if msg.seq > track.hwm + 1:
        gap = Result(
            link=params.link_id,
            table=table,
            seq=msg.seq,
            id=msg.id,
            status="resend",
            code="gap",
            reason=f"expected sequence {track.hwm + 1}",
            resend_from=track.hwm + 1,
            lseq=0,
            head=head,
        )
        return Step(state, (), (gap,))
    if track.head is not None and (
        msg.head.seq < track.head.seq
        or (msg.head.seq == track.head.seq and msg.head.hash != track.head.hash)
    ):
        why = f"ledger head {msg.head.seq} does not follow the witnessed {track.head.seq}"
        return _refuse(params, state, table, msg.seq, msg.id, "head-regressed", why, head)
    return _apply(params, state, msg, raw, track, at_ms, head)


def _apply(
    params: lp.LinkParams,
    state: BookState,
    msg: TableMessage,
    raw: bytes,
    track: TableTrack,
    at_ms: int,
    head: LedgerHead,
) -> Step:
    lseq = state.lseq + 1
    work = effects.Work.of(state, lseq, at_ms)
    code, reason = "ok", ""
    try:
        _EFFECTS[msg.type](params, work, msg)  # type: ignore[operator]
    except effects.Refusal as refusal:
        work = effects.Work.of(state, lseq, at_ms)  # throw the partial effect away
        code, reason = refusal.code, refusal.reason
    own = [(msg.table, c) for c in _claim_ids(msg)]
    result = Result(
        link=params.link_id,
        table=msg.table,
        seq=msg.seq,
        id=msg.id,
        status="applied" if code == "ok" else "refused",
        code=code,
        reason=reason,
        resend_from=0,
        lseq=lseq,
        head=head,
        awards=tuple(_award(work.claims, work.groups, k) for k in own if k in work.claims),
    )
    results = dict(track.results)
    results[msg.seq] = Stored(sha256(raw).digest(), result)
    results.pop(msg.seq - params.keep_results, None)
    tables = dict(state.tables)
    tables[msg.table] = TableTrack(msg.seq, msg.head, results)
    new = BookState(
        lseq,
        work.balances,
        tables,
        work.claims,
        work.groups,
        work.contributions,
        work.epochs,
        work.hits,
    )
    event = Applied(
        lseq=lseq,
        table=msg.table,
        seq=msg.seq,
        id=msg.id,
        head=msg.head,
        message=raw,
        postings=tuple(work.postings),
        result=result,
    )
    updates = tuple(
        AwardUpdate(
            link=params.link_id,
            table=key[0],
            lseq=lseq,
            head=head,
            award=_award(work.claims, work.groups, key),
        )
        for key in sorted(work.touched)
        if key not in own
    )
    return Step(new, (event,), (result, *updates))


def _claim_ids(msg: TableMessage) -> tuple[str, ...]:
    if isinstance(msg, (Claim, ClaimConfirm, ClaimReject)):
        return (msg.claim,)
    return ()


def _award(
    claims: Mapping[ClaimKey, ClaimState], groups: Mapping[int, Group], key: ClaimKey
) -> Award:
    """A claim's award; ``share_of`` counts its group's members not rejected."""
    claim = claims[key]
    members = groups[claim.group].members
    return claim.award(max(1, sum(claims[k].state != "rejected" for k in members)))


def _refuse(
    params: lp.LinkParams,
    state: BookState,
    table: str | None,
    seq: int,
    msg_id: str,
    code: str,
    reason: str,
    head: LedgerHead,
) -> Step:
    reason = reason[:MAX_REASON]  # a result's reason is bounded (docs/link.md's schema)
    event = LinkRefused(table=table or "", seq=seq, code=code, reason=reason)
    if table is None:
        return Step(state, (event,), ())
    reply = Result(
        link=params.link_id,
        table=table,
        seq=seq,
        id=msg_id,
        status="refused",
        code=code,
        reason=reason,
        resend_from=0,
        lseq=0,
        head=head,
    )
    return Step(state, (event,), (reply,))


# -- views --------------------------------------------------------------------------------


def meter_view(
    params: lp.LinkParams, state: BookState, meter_id: str, head: LedgerHead
) -> LinkedMeter:
    """The linked meter as the link publishes it (retained) after a step."""
    return LinkedMeter(
        link=params.link_id,
        meter=meter_id,
        units=state.balances.get(accounts.meter(meter_id), 0),
        epoch=state.epochs.get(meter_id, 0),
        lseq=state.lseq,
        head=head,
        hit=state.hits.get(meter_id),
    )


def heartbeat(
    params: lp.LinkParams, state: BookState, table: str, head: LedgerHead, at: str
) -> Heartbeat:
    """The link's heartbeat to one table: alive, and the next sequence it expects."""
    track = state.tables.get(table, TableTrack())
    return Heartbeat(
        link=params.link_id,
        table=table,
        expect=track.hwm + 1,
        lseq=state.lseq,
        head=head,
        at=at,
    )


def identity_gaps(params: lp.LinkParams, state: BookState) -> dict[str, int]:
    """Per linked meter, the accounting identity's gap (all zero when it holds)."""
    return {spec.id: lp.identity_gap(state.balances, spec.id) for spec in params.meters}
