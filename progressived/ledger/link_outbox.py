"""The link outbox's rows in the table ledger: typed operations, the only SQL on them.

A table with linked meters keeps the messages the link has not answered yet in the ledger's
``link_outbox`` table (docs/ledger.md), written in the transaction of the decision that made
them and deleted in the transaction that journals their final result. The daemon's link
adapter (:mod:`progressived.daemon.link`) asks for them through these operations, never in
SQL of its own, so the ledger's schema stays the ledger's business.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from progressived.storage.port import Statement

_INSERT = "INSERT INTO link_outbox (seq, id, type, topic, payload) VALUES (?, ?, ?, ?, ?)"
_DELETE = "DELETE FROM link_outbox WHERE seq = ?"
_PENDING = "SELECT seq, id, type, topic, payload FROM link_outbox WHERE seq > ? ORDER BY seq"
_ONE = "SELECT seq, id, type, topic, payload FROM link_outbox WHERE seq = ?"
_DEPTH = "SELECT count(*), (SELECT payload FROM link_outbox ORDER BY seq LIMIT 1) FROM link_outbox"
_SENT_SINCE = (
    "SELECT data FROM journal WHERE kind = 'link_sent' AND "
    "(round >= ? OR seq = (SELECT max(seq) FROM journal WHERE kind = 'link_sent')) "
    "ORDER BY seq"
)


@dataclass(frozen=True, slots=True)
class LinkMessageRow:
    """One message to the link, waiting for its final result."""

    seq: int
    id: str
    type: str
    topic: str
    payload: str


@dataclass(frozen=True, slots=True)
class QueueLinkMessage:
    """Put a message in the link outbox (with the decision that made it)."""

    row: LinkMessageRow


@dataclass(frozen=True, slots=True)
class DropLinkMessage:
    """Take the message of sequence ``seq`` out (with the journaled final result)."""

    seq: int


LinkOutboxChange = QueueLinkMessage | DropLinkMessage
"""What a ledger transaction may do to the link outbox beside its journal rows."""


@dataclass(frozen=True, slots=True)
class LinkOutboxDepth:
    """How many messages wait, and the oldest one's payload (``None`` when none wait)."""

    depth: int
    oldest_payload: str | None


def statement(change: LinkOutboxChange) -> Statement:
    """The SQL of one change, for the transaction that carries it."""
    if isinstance(change, QueueLinkMessage):
        r = change.row
        return _INSERT, (r.seq, r.id, r.type, r.topic, r.payload)
    return _DELETE, (change.seq,)


def _row(values: tuple[Any, ...]) -> LinkMessageRow:
    seq, ident, kind, topic, payload = values
    return LinkMessageRow(int(seq), str(ident), str(kind), str(topic), str(payload))


def pending(conn: sqlite3.Connection, after_seq: int = 0) -> list[LinkMessageRow]:
    """The messages after ``after_seq``, in sequence order."""
    return [_row(v) for v in conn.execute(_PENDING, (after_seq,)).fetchall()]


def message(conn: sqlite3.Connection, seq: int) -> LinkMessageRow | None:
    """The waiting message of sequence ``seq``, if it still waits."""
    found = conn.execute(_ONE, (seq,)).fetchone()
    return None if found is None else _row(found)


def depth(conn: sqlite3.Connection) -> LinkOutboxDepth:
    """The outbox's depth and its oldest message's payload."""
    count, payload = conn.execute(_DEPTH).fetchone()
    return LinkOutboxDepth(int(count), None if payload is None else str(payload))


def sent_since(conn: sqlite3.Connection, round_no: int) -> list[dict[str, Any]]:
    """The ``link_sent`` rows' data of round ``round_no`` on, and the last one ever (what
    rebuilds the outbox's sequences and claim ids), in journal order."""
    return [json.loads(data) for (data,) in conn.execute(_SENT_SINCE, (round_no,)).fetchall()]
