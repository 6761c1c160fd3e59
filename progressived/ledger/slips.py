"""The ledger's side of payout slips: journaled in the transaction of the award they pay.

A ledger given a :class:`SlipIssuer` (the daemon gives it one from ``[slips]``) expands
every write before planning it: after each batch of engine events it puts the slip rows
:func:`progressived.slips.issue.issue` decides from them (``slip_issued``,
``slip_voided``), so the award and its slip commit together or not at all, and a batch
that is a duplicate (its idempotency key journaled before) gets none, as it writes
nothing. The series (the last number) moves only when the write commits: numbers without
gaps, never reused. Operator voids and reissues (:func:`void_rows`) are journaled the same
way, under the ledger's lock. Reading slips back is :mod:`progressived.ledger.slip_reads`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from progressived.core.params import TableParams
from progressived.engine.state import TableState
from progressived.ledger.rows import Batch, Record
from progressived.slips.issue import Series, issue, reissued
from progressived.slips.rules import SlipRules
from progressived.slips.slip import ISSUED, VOIDED, Slip, Void, VoidCause


@dataclass(frozen=True, slots=True)
class SlipIssuer:
    """The site's slip rules and the parameters in force (they change on a reload)."""

    rules: SlipRules
    params: Callable[[], TableParams]


class SlipRefused(ValueError):
    """A void or reissue the ledger will not journal (unknown serial, already void)."""


def with_slips(
    issuer: SlipIssuer,
    items: Sequence[Batch | Record],
    state: TableState,
    series: Series,
    known: Collection[str],
) -> tuple[list[Batch | Record], Series, list[int]]:
    """``items`` with each batch's slip rows after it, the series once they commit, and
    where each of ``items`` is in the list (the caller's results are theirs alone)."""
    out: list[Batch | Record] = []
    positions: list[int] = []
    seen = set(known)
    for item in items:
        positions.append(len(out))
        out.append(item)
        key = item.idempotency_key
        if key is not None:
            if key in seen:
                continue  # a duplicate writes nothing; its slips went with its first call
            seen.add(key)
        if not isinstance(item, Batch):
            continue
        entries, series = issue(
            issuer.rules, issuer.params(), state, item.events, item.actor, series
        )
        state = item.state
        out.extend(
            Record(
                kind=e.kind,
                detail=e.data,
                at=item.at,
                actor=e.actor,
                round=e.round,
                seat=e.seat,
                category="system",
            )
            for e in entries
        )
    return out, series, positions


def recover_series(conn: sqlite3.Connection) -> Series:
    """The series as the journal leaves it: the last number issued, and the live slips of
    the latest round that has any (one indexed query each: ``journal_kind``)."""
    last = conn.execute(
        "SELECT round, data FROM journal WHERE kind = ? ORDER BY seq DESC LIMIT 1", (ISSUED,)
    ).fetchone()
    if last is None:
        return Series()
    round_ = int(last[0])
    live: dict[str, tuple[str, int]] = {}
    for kind, text in conn.execute(
        "SELECT kind, data FROM journal WHERE kind IN (?, ?) AND round = ? ORDER BY seq",
        (ISSUED, VOIDED, round_),
    ):
        data = json.loads(text)
        if kind == ISSUED:
            live[data["award"]] = (data["serial"], int(data["number"]))
        elif live.get(data["award"], ("", 0))[0] == data["serial"]:
            del live[data["award"]]
    number = int(json.loads(last[1])["number"])
    return Series(number, round_, MappingProxyType(live))


def void_rows(
    conn: sqlite3.Connection,
    issuer: SlipIssuer,
    series: Series,
    *,
    serial: str,
    reason: str,
    by: str,
    reissue: bool,
    at: str,
) -> tuple[list[Record], Series, Slip | None]:
    """An operator's void of ``serial`` (and its reissue under the next serial): the rows,
    the series after them, and the new slip. Refuses an unknown or already void serial,
    an empty reason or name."""
    if not reason.strip() or not by.strip():
        raise SlipRefused("a void needs a reason and who voids it (--reason, --by)")
    rows = conn.execute(
        "SELECT kind, data FROM journal WHERE kind IN (?, ?) "
        "AND json_extract(data, '$.serial') = ? ORDER BY seq",
        (ISSUED, VOIDED, serial),
    ).fetchall()
    issued = [json.loads(text) for kind, text in rows if kind == ISSUED]
    if not issued:
        raise SlipRefused(f"no slip {serial} in this ledger")
    if any(kind == VOIDED for kind, _ in rows):
        raise SlipRefused(f"slip {serial} is already void")
    slip = Slip.from_dict(issued[0])
    again, after = reissued(issuer.rules, slip, series, by) if reissue else (None, series)
    void = Void(
        serial=slip.serial,
        number=slip.number,
        award=slip.award,
        cause=VoidCause.OPERATOR,
        reason=reason,
        by=by,
        reissued_as=again.serial if again is not None else None,
    )
    records = [_record(VOIDED, void.to_dict(), at, by, slip, "operator")]
    if again is not None:
        records.append(_record(ISSUED, again.to_dict(), at, by, again, "operator"))
    elif slip.award in after.live and after.live[slip.award][0] == slip.serial:
        live = {k: v for k, v in after.live.items() if k != slip.award}
        after = Series(after.last, after.round, MappingProxyType(live))
    return records, after, again


def _record(kind: str, data: dict[str, object], at: str, by: str, slip: Slip, cat: str) -> Record:
    return Record(
        kind=kind, detail=data, at=at, actor=by, round=slip.round, seat=slip.seat, category=cat
    )
