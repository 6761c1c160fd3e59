"""The link ledger's rows for a batch of book steps (pure): what :class:`LinkLedger` plans.

Each :class:`~progressived.link.core.state.Applied` event is a ``link_applied`` row (engine,
its postings, idempotency key ``TABLE:SEQ``, its data the canonical text
:func:`progressived.link.core.journal.applied_text` builds), each refusal a ``link_refused``
row (system); the rows' ``at`` is the link's receive time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from progressived.engine.events import Posting
from progressived.ledger.rows import Record
from progressived.link.core import journal
from progressived.link.core.state import Applied, Step

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def at_of(at_ms: int) -> str:
    """A row's ``at``: the link's receive time, UTC ISO-8601 to the millisecond."""
    moment = _EPOCH + timedelta(milliseconds=at_ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record(
    kind: str,
    data: Mapping[str, Any],
    at: str,
    actor: str,
    category: str,
    key: str | None = None,
    postings: tuple[Posting, ...] = (),
) -> Record:
    return Record(
        kind=kind,
        detail=data,
        at=at,
        actor=actor,
        category=category,
        idempotency_key=key,
        postings=postings,
    )


def records(steps: Sequence[tuple[Step, int]]) -> list[Record]:
    """The rows of a batch of book steps, in order (only events write rows)."""
    out: list[Record] = []
    last_ms, at = -1, ""
    for step, at_ms in steps:
        if at_ms != last_ms:  # a batch shares a few receive times: format each once
            last_ms, at = at_ms, at_of(at_ms)
        for event in step.events:
            if isinstance(event, Applied):
                key = f"{event.table}:{event.seq}"
                text = journal.applied_text(event, at_ms)  # = dumps(journal.applied(...))
                out.append(
                    Record(
                        kind=event.kind,
                        detail={},
                        at=at,
                        actor=event.table,
                        category="engine",
                        idempotency_key=key,
                        postings=event.postings,
                        text=text,
                    )
                )
            else:
                out.append(
                    record(event.kind, journal.refused(event), at, event.table or "", "system")
                )
    return out
