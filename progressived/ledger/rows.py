"""What the ledger's callers hand it and get back: batches, records, results, outbox rows.

Plain frozen dataclasses and two pure helpers (the stored JSON text, the non-zero
balances), shared by the planner (:mod:`progressived.ledger.plan`, pure), the writer
(:mod:`progressived.ledger.store`) and the checks. No I/O here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

from progressived.engine.events import Event, Posting
from progressived.engine.state import TableState

CATEGORIES = ("engine", "system", "operator", "parameter")

# One encoder for every row: ``json.dumps`` with options builds a new one on each call, and
# ``JSONEncoder.encode`` builds its C encoder on each call too; this is that C encoder, made
# once with the same settings (sort_keys, "," and ":", ASCII, no NaN). It keeps no markers
# (so no shared state between threads): a value that contains itself ends in the C
# encoder's RecursionError, reported as the ValueError the markers would have given.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)
_C_ENCODE = (
    c_make_encoder(
        None, _ENCODER.default, encode_basestring_ascii, None, ":", ",", True, False, False
    )
    if c_make_encoder is not None
    else None
)


def dumps(data: Mapping[str, Any]) -> str:
    """The stored JSON text: sorted keys, no spaces, ASCII only, no NaN (hash-stable)."""
    if _C_ENCODE is None:  # an interpreter without the C accelerator
        return _ENCODER.encode(data)
    try:
        return "".join(_C_ENCODE(data, 0))
    except RecursionError:
        raise ValueError("Circular reference detected") from None


def nonzero(balances: Mapping[str, int]) -> dict[str, int]:
    return {account: units for account, units in balances.items() if units}


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """A message to publish once the rows it describes are durable (transactional outbox)."""

    topic: str
    payload: str
    qos: int = 1
    retain: bool = False


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """An outbox message not yet acknowledged, with its id and the journal row it follows."""

    id: int
    seq: int
    topic: str
    payload: str
    qos: int
    retain: bool


@dataclass(frozen=True, slots=True)
class JournalRow:
    """One journal row as written: ``data`` is the event dict or the system event's detail."""

    seq: int
    at: str
    kind: str
    round: int | None
    seat: int
    data: dict[str, Any]
    category: str = "engine"
    actor: str = ""
    idem_key: str | None = None
    hash: str = ""


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The journal rows a call wrote (``last_seq < first_seq`` when it wrote none)."""

    first_seq: int
    last_seq: int
    duplicate: bool = False


OutboxFn = Callable[[Sequence[JournalRow]], Sequence[OutboxMessage]]


@dataclass(frozen=True, slots=True)
class Batch:
    """One :meth:`Ledger.append` call, for :meth:`Ledger.append_many` (group commit)."""

    events: Sequence[Event]
    state: TableState
    at: str
    actor: str = ""
    idempotency_key: str | None = None
    outbox: OutboxFn | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """A system / operator / parameter row (no postings, no state change).

    Keyword-only: nine of its fields are strings, ints or ``None`` that a positional call
    could swap without a type error. ``postings`` (balanced) is for a writer whose money
    rows are not engine events (the link controller's ledger,
    progressived.link.store.ledger); the table's rows leave it empty.
    """

    kind: str
    detail: Mapping[str, Any]
    at: str
    actor: str
    round: int | None = None
    seat: int = 0
    category: str = "system"
    idempotency_key: str | None = None
    outbox: OutboxFn | None = None
    postings: tuple[Posting, ...] = ()
    # ``detail`` as the stored JSON text (``dumps(detail)`` exactly), when the writer has it
    # already: the link ledger builds its rows' text from the messages' canonical bytes.
    text: str | None = None
