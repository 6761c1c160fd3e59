"""Rebuilding the link's book when its ledger is opened (split from the ledger's writing).

The latest snapshot that names its row's hash and reads back is loaded and the
``link_applied`` rows after it are replayed through the pure book, each stored result and
posting checked; with no usable snapshot (or one whose replay fails) every row is replayed,
and why is logged. The hash chain is checked on the way, from the snapshot's row: a break
there is the rows' fault, so no full replay is tried.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from progressived.ledger import chain
from progressived.ledger.errors import LedgerMismatch, LedgerMissing
from progressived.ledger.rows import nonzero
from progressived.link.core import journal, snapshot
from progressived.link.core.messages import LedgerHead
from progressived.link.core.state import BookState
from progressived.storage.port import LedgerStore

NEVER = 2**62  # the plan's own (table) snapshots are off: the link ledger writes the link's
TRIES = 3  # snapshots tried at open, newest first, before replaying every row

log = structlog.get_logger("progressived.link.ledger")

_Found = tuple[int, str, journal.Replay]  # a snapshot's row, its hash, the replay at it


@dataclass(frozen=True, slots=True)
class Recovery:
    """How the book was rebuilt at open: from which snapshot (0: none, every row replayed),
    how many rows after it were read, and how long it took."""

    snapshot_seq: int
    replayed: int
    seconds: float
    why_full: str = ""  # why no snapshot was used, when one exists


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovered:
    """The book rebuilt from the store, and what the ledger keeps beside it."""

    book: BookState
    head: LedgerHead
    balances: dict[str, int]  # the store's balances table (checked against the book's)
    recorded: dict[str, Any]  # the parameters as last journaled
    since_snapshot: int  # rows after the snapshot used (all rows when none)
    recovery: Recovery


class ChainBroken(LedgerMismatch):
    """The hash chain breaks after the snapshot: no full replay would open the ledger."""


TICK_ROWS = 100
"""Rows read between two calls of a rebuild's ``tick`` (a few milliseconds of work)."""
_Row = TypeVar("_Row")


def _ticking(rows: Iterable[_Row], tick: Callable[[], None]) -> Iterator[_Row]:
    for count, row in enumerate(rows, start=1):
        if count % TICK_ROWS == 0:
            tick()
        yield row


def recover(
    store: LedgerStore, snapshot_every: int, tick: Callable[[], None] = lambda: None
) -> Recovered:
    """Rebuild the book: the latest usable snapshot and the rows after it, else every
    row (the chain checked on the way, from the snapshot's row). ``tick`` is called every
    :data:`TICK_ROWS` rows read: a controller renews its lease there, so that a rebuild
    longer than the lease's term does not end with the lease lost (and a standby, taking
    it then, rebuilding as long and losing it in turn: nobody would ever serve)."""
    started = time.perf_counter()
    found, why = _snapshot(store)
    if found is not None:
        try:
            return _replay(store, found, started, snapshot_every, tick=tick)
        except ChainBroken:
            raise  # the rows are at fault, whatever the snapshot holds
        except LedgerMismatch as exc:  # the snapshot, or a row after it: see below
            why = f"replaying from the snapshot at row {found[0]} failed: {exc}"
            log.error(
                "link ledger snapshot refused: replaying every row",
                path=store.where,
                snapshot_seq=found[0],
                why=why,
            )
    return _replay(store, None, started, snapshot_every, why, tick=tick)


def _snapshot(store: LedgerStore) -> tuple[_Found | None, str]:
    """The newest of the last :data:`TRIES` snapshots that names its row's hash and
    reads back, as (seq, hash, the replay at that row); else ``None`` and why."""
    why = "the ledger has no snapshot"
    for seq, snap_hash, row_hash in store.snapshots(TRIES):
        if snap_hash != row_hash:
            why = f"the snapshot at row {seq} does not name that row's hash"
        else:
            try:
                recorded, state = snapshot.loads(store.snapshot_text(seq))
                replay = journal.Replay()
                replay.params = journal.params_from_dict(recorded)
                replay.recorded = journal.params_to_dict(replay.params)
                replay.state = state
                return (seq, snap_hash, replay), ""
            except (KeyError, TypeError, ValueError) as exc:  # SnapshotError too
                why = f"the snapshot at row {seq} cannot be read: {exc}"
        log.warning("link ledger snapshot unusable", path=store.where, snapshot_seq=seq, why=why)
    return None, why


def _replay(
    store: LedgerStore,
    found: _Found | None,
    started: float,
    snapshot_every: int,
    why: str = "",
    *,
    tick: Callable[[], None],
) -> Recovered:
    where = store.where
    since, since_hash, replay = found if found is not None else (0, chain.GENESIS, None)
    replay = replay or journal.Replay()
    walk = chain.Walk(since, since_hash)
    for seq, _check, message in walk.breaks(_ticking(store.chain_rows(since, NEVER), tick)):
        raise ChainBroken(
            f"ledger {where}: row {seq}: {message} (run `progressivectl ledger verify`)"
        )
    if walk.seq == 0:
        raise LedgerMissing(f"link ledger {where} has no rows: it was never initialised")
    replayed = 0
    for seq, kind, data in _ticking(store.rows(since), tick):
        replayed += 1
        wrong = replay.row(str(kind), json.loads(data))
        if wrong is not None:
            raise LedgerMismatch(
                f"ledger {where}: row {seq} ({kind}): {wrong} "
                "(run `progressivectl ledger verify`)"
            )
    table = store.balances()
    if nonzero(table) != nonzero(replay.state.balances):
        raise LedgerMismatch(
            f"ledger {where}: the balances table differs from the replayed "
            "book (run `progressivectl ledger verify`)"
        )
    recovery = Recovery(since, replayed, time.perf_counter() - started, why)
    if found is None and walk.seq > snapshot_every:
        log.warning(
            "link ledger opened by replaying every row",
            path=where,
            rows=replayed,
            seconds=round(recovery.seconds, 3),
            why=why,
        )
    return Recovered(
        book=replay.state,
        head=LedgerHead(walk.seq, walk.hash),
        balances=table,
        recorded=replay.recorded or {},
        since_snapshot=walk.seq - since,
        recovery=recovery,
    )
