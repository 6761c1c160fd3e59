"""Each table's hash chain, checked as its rows arrive (docs/archive.md, "The chain check").

The archive keeps every table's head (the last archived row's ``seq`` and ``hash``). A run
of rows from the table is judged against it before anything is stored:

* rows numbered without a gap, each ``prev_hash`` the hash of the row before and each
  ``hash`` the SHA-256 of its own content (docs/ledger.md, "Tamper evidence"), the first
  row's ``prev_hash`` the archived head's hash;
* rows at or below the head (a repeat: the table sent them again) must be the archived
  ones, hash for hash;
* a run that starts beyond ``head + 1`` is not refused: nothing is stored and the table is
  told to send from ``head + 1`` (``resend``).

A broken chain or a rewritten row is **refused** (``chain-broken``, ``rewritten``): nothing
of the run is stored, and the archive raises an alarm. Pure: the caller reads the archived
hashes of the repeated rows beforehand (:func:`repeated`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from hashlib import sha256

from progressived.archive.core.wire import GENESIS, Row


class Outcome(Enum):
    STORE = "store"  # new rows to store (maybe after repeated ones)
    REPEAT = "repeat"  # every row was archived already: nothing to store
    RESEND = "resend"  # a gap after the head: send from head + 1
    REFUSED = "refused"  # a broken or rewritten chain: alarm, store nothing


CHAIN_BROKEN = "chain-broken"
REWRITTEN = "rewritten"


@dataclass(frozen=True, slots=True)
class Head:
    seq: int = 0
    hash: str = GENESIS


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    head: Head  # the head after the run (unchanged unless STORE)
    fresh: tuple[Row, ...] = ()
    code: str = ""
    reason: str = ""
    seq: int = 0  # the row at fault (REFUSED)


def repeated(head: Head, rows: Sequence[Row]) -> tuple[int, int] | None:
    """The range of ``rows`` at or below ``head`` (their archived hashes are needed), or None."""
    low = rows[0].seq
    if low > head.seq:
        return None
    return low, min(rows[-1].seq, head.seq)


def _refused(head: Head, code: str, row: Row, why: str) -> Verdict:
    return Verdict(Outcome.REFUSED, head, code=code, reason=f"row {row.seq}: {why}", seq=row.seq)


def judge(head: Head, table: str, rows: Sequence[Row], archived: Mapping[int, str]) -> Verdict:
    """The verdict on ``rows`` from ``table`` after ``head``; ``archived`` maps each
    repeated seq (:func:`repeated`) to its archived hash."""
    expected = rows[0].seq
    for row in rows:
        if row.seq != expected:
            return _refused(head, CHAIN_BROKEN, row, f"expected row {expected} here")
        if sha256(row.content(table).encode()).hexdigest() != row.hash:
            return _refused(head, CHAIN_BROKEN, row, "its hash is not its content's")
        expected += 1
    for prev, row in itertools.pairwise(rows):
        if row.prev_hash != prev.hash:
            return _refused(head, CHAIN_BROKEN, row, "prev_hash is not the row before's hash")
    fresh = [r for r in rows if r.seq > head.seq]
    for row in rows:
        if row.seq > head.seq:
            break
        if archived.get(row.seq) != row.hash:
            return _refused(head, REWRITTEN, row, "differs from the archived row")
    if not fresh:
        return Verdict(Outcome.REPEAT, head)
    first = fresh[0]
    if first.seq != head.seq + 1:
        return Verdict(
            Outcome.RESEND,
            head,
            reason=f"rows from {first.seq}; the archive holds up to {head.seq}",
        )
    if first.prev_hash != head.hash:
        return _refused(head, REWRITTEN, first, f"does not follow the archived row {head.seq}")
    return Verdict(Outcome.STORE, Head(fresh[-1].seq, fresh[-1].hash), fresh=tuple(fresh))
