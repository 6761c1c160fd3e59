"""One batch of table messages through the link book (pure: no I/O, no clock).

The controller drains what the broker delivered (up to ``[link] batch_max``), runs each
message through :func:`progressived.link.core.book.receive` on the book as last committed,
commits the steps with one :meth:`LinkJournal.commit` (group commit), and only then
publishes the replies and the meters that changed. Every message of a batch is answered
with the link ledger's head as of the commit before the batch (what ``receive`` is given),
so a replay reproduces each result exactly.

A refusal that consumed no sequence changed nothing: its ``LinkRefused`` event is counted and
listed (``Outcome.refusals``) but left out of the steps to journal, so junk costs the
ledger no row (docs/link.md, "Fair share"). Its answer, and a ``resend`` answer, is marked
(``Publication.non_final_to``) so the controller can keep such answers within a budget per
table.

Micro-benchmark: ``python -m bench.link_budget --floors`` (one message decoded and booked
alone); the whole batch under load: ``python -m bench.run --only floor,link``
(docs/performance.md, "The link's message -> answer").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from progressived.link.core import book
from progressived.link.core import params as lp
from progressived.link.core.messages import (
    AwardUpdate,
    LedgerHead,
    LinkedMeter,
    MessageError,
    Result,
    TableMessage,
    decode_table,
    encode,
    meter_topic,
    to_table_topic,
)
from progressived.link.core.state import Applied, BookState, LinkRefused, Step


@dataclass(frozen=True, slots=True)
class Incoming:
    """A message as the broker delivered it, with the link's receive time (ms)."""

    topic: str
    payload: bytes
    at_ms: int


@dataclass(frozen=True, slots=True)
class Publication:
    """One MQTT message the link controller publishes (a reply, a heartbeat, a meter)."""

    topic: str
    payload: bytes
    retain: bool = False
    # an answer that consumed nothing (a refusal with lseq 0, a resend): the table it is to
    non_final_to: str = ""


@dataclass
class Outcome:
    """What a batch did: the steps to commit, what to publish after, and how it went."""

    steps: list[tuple[Step, int]] = field(default_factory=list)  # to journal: Applied only
    replies: list[Publication] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)  # applied|refused|resend|duplicate
    refusals: list[LinkRefused] = field(default_factory=list)  # not consuming a sequence
    final_refusals: list[Applied] = field(default_factory=list)  # consumed, refused on content
    state: BookState = field(default_factory=BookState)  # the book after the batch

    @property
    def needs_commit(self) -> bool:
        return any(step.events for step, _ in self.steps)


def sender_of(prefix: str, link: str, topic: str) -> str:
    """The table a ``.../from/<table>`` topic names (its last level, whatever it is).

    A topic level that is not a valid table id is given to the book as it is: the book then
    refuses the message as ``forged`` or ``unknown-table``, journaled like any refusal.
    """
    head = f"{prefix}/link/{link}/from/"
    return topic[len(head) :] if topic.startswith(head) else topic.rsplit("/", 1)[-1]


def decode_all(batch: Sequence[Incoming]) -> list[TableMessage | bytes]:
    """Each payload of ``batch`` as its message, before the book sees any (the controller
    times decoding apart from booking: docs/performance.md, "The link's message -> answer").
    A payload the decoder refuses stays bytes: the book decodes it again and refuses it
    with its code (junk pays twice; a valid message once)."""
    out: list[TableMessage | bytes] = []
    for item in batch:
        try:
            out.append(decode_table(item.payload))
        except MessageError:
            out.append(item.payload)
    return out


def run_batch(
    params: lp.LinkParams,
    state: BookState,
    head: LedgerHead,
    batch: list[Incoming],
    prefix: str,
    decoded: Sequence[TableMessage | bytes] | None = None,
) -> Outcome:
    """Every message of ``batch`` through the book, in order, on ``state`` (``decoded``:
    the batch's payloads as :func:`decode_all` gave them)."""
    out = Outcome(state=state)
    for index, item in enumerate(batch):
        table = sender_of(prefix, params.link_id, item.topic)
        payload = item.payload if decoded is None else decoded[index]
        step = book.receive(
            params, out.state, payload, topic_table=table, at_ms=item.at_ms, head=head
        )
        out.state = step.state
        _count(out, step)
        if any(isinstance(e, LinkRefused) for e in step.events):  # counted, not journaled
            step = Step(step.state, _applied(step), step.replies)
        out.steps.append((step, item.at_ms))
        for reply in step.replies:
            if reply.table in params.tables or _told_not_a_member(reply, table):
                topic = to_table_topic(prefix, params.link_id, reply.table)
                non_final = (
                    isinstance(reply, Result) and reply.lseq == 0 and reply.status != "applied"
                )
                to = reply.table if non_final else ""
                out.replies.append(Publication(topic, encode(reply), non_final_to=to))
    return out


def _applied(step: Step) -> tuple[Applied, ...]:
    return tuple(e for e in step.events if isinstance(e, Applied))


def _told_not_a_member(reply: object, topic_table: str) -> bool:
    """A stranger gets one answer: ``unknown-table``, on the reply topic of the topic it
    sent on (which its own message names: the broker's ACL lets only that table write it),
    so a table missing from ``[link] tables`` learns it at its first message. Nothing else
    is ever published for a stranger."""
    return (
        isinstance(reply, Result) and reply.code == "unknown-table" and reply.table == topic_table
    )


def _count(out: Outcome, step: Step) -> None:
    for event in step.events:
        if isinstance(event, LinkRefused):
            out.counts["refused"] += 1
            out.refusals.append(event)
        elif event.result.status == "applied":
            out.counts["applied"] += 1
        else:
            out.counts["refused"] += 1
            out.final_refusals.append(event)
    if not step.events:
        first = step.replies[0] if step.replies else None
        if isinstance(first, Result) and first.status == "resend":
            out.counts["resend"] += 1
        else:
            out.counts["duplicate"] += 1


def meters(params: lp.LinkParams, state: BookState, head: LedgerHead) -> dict[str, LinkedMeter]:
    """Every linked meter as published (retained)."""
    return {spec.id: book.meter_view(params, state, spec.id, head) for spec in params.meters}


def shown(meter: LinkedMeter) -> tuple[int, int, object]:
    """What a sign shows of a meter: a change of these is worth a publish."""
    return (meter.units, meter.epoch, meter.hit)


def meter_messages(
    params: lp.LinkParams, prefix: str, views: dict[str, LinkedMeter]
) -> list[Publication]:
    return [
        Publication(meter_topic(prefix, params.link_id, meter_id), encode(view), retain=True)
        for meter_id, view in views.items()
    ]


__all__ = [
    "AwardUpdate",
    "Incoming",
    "Outcome",
    "Publication",
    "decode_all",
    "meter_messages",
    "meters",
    "run_batch",
    "sender_of",
    "shown",
]
