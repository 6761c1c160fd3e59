"""The rows a report lists one by one: awards paid, seeds and resets, operator adjustments
and transfers, parameter changes.

They are few (a busy quarter pays hundreds of awards among millions of rows), so they are
found through the journal's kind index (a link's claims through the ``postings`` table's
accounts: a leg on a meter's seed funding, pending or paid account), and then read from
their hashed ``data``. A table's awards and a link's claims are read alike: a claim's
table, seat and hand come from the claim row its confirmation names.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

# A link's rows are all ``link_applied``: its claims, confirmations and rejections are the
# rows with a leg on a meter's seed funding, pending or paid account.
_LINK_ROWS = """
SELECT j.seq, j.at, j.kind, j.round, j.seat, j.actor, j.data FROM journal j
 WHERE j.seq IN (SELECT DISTINCT seq FROM postings WHERE seq > :after AND seq <= :last
                    AND (account GLOB 'seed_funding:*' OR account GLOB 'adjustments:*'
                         OR account GLOB 'paid_attendant:*' OR account GLOB 'award_pending:*'))
 ORDER BY j.seq"""
# A table's (and a link's own) are found by kind, through the journal's kind index.
_KIND_ROWS = """
SELECT seq, at, kind, round, seat, actor, data FROM journal
 WHERE kind IN ('meter_opened', 'award_keyed', 'award_reversed', 'award_confirmed',
                'meter_adjusted', 'meter_transferred', 'parameter_changed')
   AND seq > :after AND seq <= :last
 ORDER BY seq"""
_CLAIM_BEFORE = """
SELECT data FROM journal WHERE kind = 'link_applied' AND seq < ?
   AND json_extract(data, '$.message.type') = 'claim'
   AND json_extract(data, '$.message.claim') = ? ORDER BY seq DESC LIMIT 1"""
_KEYED_BEFORE = """
SELECT json_extract(data, '$.meter_before'), json_extract(data, '$.meter_after') FROM journal
 WHERE kind = 'award_keyed' AND seq < ? AND round IS ? AND seat = ?
   AND json_extract(data, '$.hand') = ? AND json_extract(data, '$.meter') = ?
 ORDER BY seq DESC LIMIT 1"""


@dataclass(frozen=True, slots=True)
class Award:
    seq: int
    at: str
    source: str  # the ledger's table or link id
    table: str  # where it was won
    round: int | None
    seat: int
    hand: str
    meter: str
    units: int
    confirmed_by: str
    meter_before: int | None
    meter_after: int | None
    slip: str | None = None  # its payout slip's serial (docs/slips.md); a link's: None


@dataclass(frozen=True, slots=True)
class Reset:
    seq: int
    at: str
    meter: str
    seed_units: int  # from the house's seed funding (negative: a reset given back)
    reserve_units: int  # from the meter's reserve
    why: str


@dataclass(frozen=True, slots=True)
class Adjustment:
    seq: int
    at: str
    meter: str
    units: int  # into this meter's liability (signed)
    what: str  # adjust | transfer in | transfer out
    operator: str
    approved_by: str
    actor: str
    reason: str
    meter_before: int | None


@dataclass(frozen=True, slots=True)
class Change:
    seq: int
    at: str
    actor: str
    key: str
    old: Any
    new: Any
    reason: str


@dataclass
class Listed:
    awards: list[Award] = field(default_factory=list)
    resets: list[Reset] = field(default_factory=list)
    adjustments: list[Adjustment] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    slips: dict[str, str] = field(default_factory=dict)  # award id -> its slip's serial


_LISTED_LEGS = frozenset({"seed_funding", "reserve", "paid_attendant"})


def _legs(data: dict[str, Any]) -> dict[str, dict[str, int]]:
    """A row's legs on the accounts the lists need: {kind: {meter: units}}."""
    out: dict[str, dict[str, int]] = {}
    for account, units in data.get("postings") or ():
        kind, sep, meter = str(account).partition(":")
        if sep and kind in _LISTED_LEGS:
            legs = out.setdefault(kind, {})
            legs[meter] = legs.get(meter, 0) + int(units)
    return out


def listed(conn: sqlite3.Connection, source: str, after: int, last: int) -> Listed:
    """Every listed row of rows ``after+1..last``, in ledger order."""
    out = Listed()
    args = {"after": after, "last": last}
    rows = conn.execute(_KIND_ROWS, args).fetchall()
    if conn.execute("SELECT 1 FROM meta WHERE key = 'ledger_kind' AND value = 'link'").fetchone():
        rows += conn.execute(_LINK_ROWS, args).fetchall()
    seen = _Seen(slips=_slips(conn, after, last))
    out.slips = seen.slips
    for seq, at, kind, rnd, seat, actor, text in sorted(rows, key=lambda r: int(r[0])):
        data = json.loads(text)
        what = kind
        if kind == "link_applied":
            what = str(data.get("message", {}).get("type"))
            if what == "claim":
                seen.claims[str(data["message"]["claim"])] = data["message"]
        if kind == "parameter_changed":
            reason = str(data.get("reason", ""))
            for key, change in sorted((data.get("changes") or {}).items()):
                out.changes.append(
                    Change(seq, at, actor, key, change.get("old"), change.get("new"), reason)
                )
            continue
        if kind == "award_keyed":
            key = (rnd, seat, data.get("hand"), data.get("meter"))
            seen.keyed[key] = (int(data["meter_before"]), int(data["meter_after"]))
        legs = _legs(data)
        seeds, reserves = legs.get("seed_funding", {}), legs.get("reserve", {})
        for meter, units in seeds.items():
            why = {
                "meter_opened": "meter opened (first funding)",
                "award_keyed": "reset after a 100% award",
                "claim": "reset after a 100% award",
            }.get(what, "a reset undone (award rejected or voided)")
            out.resets.append(Reset(seq, at, meter, -units, -reserves.get(meter, 0), why))
        for meter, units in legs.get("paid_attendant", {}).items():
            row = _Row(seq, at, what, rnd, seat, data)
            out.awards.append(_award(conn, source, row, meter, units, seen))
        if what == "meter_adjusted":
            out.adjustments.append(
                Adjustment(seq, at, str(data["meter"]), int(data["units"]), "adjust",
                           str(data.get("operator", "")), str(data.get("approved_by", "")),
                           actor, str(data.get("reason", "")), data.get("meter_before"))
            )
        elif what == "meter_transferred":
            for meter, sign, label in ((data["from_meter"], -1, "transfer out"),
                                       (data["to_meter"], 1, "transfer in")):
                out.adjustments.append(
                    Adjustment(seq, at, str(meter), sign * int(data["units"]), label,
                               str(data.get("operator", "")), str(data.get("approved_by", "")),
                               actor, str(data.get("reason", "")), None)
                )
    return out


@dataclass(frozen=True, slots=True)
class _Row:
    seq: int
    at: str
    what: str  # the kind; a link row's message type
    round: int | None
    seat: int
    data: dict[str, Any]


@dataclass
class _Seen:
    """What the rows before an award said about it: claims, keyed awards, payout slips."""

    slips: dict[str, str]  # award id (ROUND:SEAT:HAND) -> its live slip's serial
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    keyed: dict[tuple[Any, ...], tuple[int, int]] = field(default_factory=dict)


def _slips(conn: sqlite3.Connection, after: int, last: int) -> dict[str, str]:
    """The period's meter payout slips (docs/slips.md), by the award they pay: the last one
    issued for it, marked ``(void)`` when it was voided without a reissue."""
    serials: dict[str, str] = {}
    voided: set[str] = set()
    for kind, text in conn.execute(
        "SELECT kind, data FROM journal WHERE kind IN ('slip_issued', 'slip_voided') "
        "AND seq > ? AND seq <= ? ORDER BY seq", (after, last),
    ):
        data = json.loads(text)
        if kind == "slip_voided":
            voided.add(str(data.get("serial")))
        elif data.get("source") == "meter":
            serials[str(data.get("award"))] = str(data.get("serial"))
    return {award: serial + (" (void)" if serial in voided else "")
            for award, serial in serials.items()}


def _award(
    conn: sqlite3.Connection, source: str, row: _Row, meter: str, units: int, seen: _Seen
) -> Award:
    """A paid award: a table's ``award_confirmed`` (with its payout slip), or a link's
    ``claim_confirm`` (its slip is the member table's)."""
    data = row.data
    if row.what == "claim_confirm":
        message = data["message"]
        claim = seen.claims.get(str(message["claim"]))
        if claim is None:  # claimed before the period: read back from the confirmation
            found = conn.execute(_CLAIM_BEFORE, (row.seq, message["claim"])).fetchone()
            claim = json.loads(found[0])["message"] if found else {}
        return Award(row.seq, row.at, source, str(claim.get("table", message.get("table", ""))),
                     claim.get("round"), int(claim.get("seat", 0)), str(claim.get("hand", "")),
                     meter, units, str(message.get("by", "")), None, None)
    hand = str(data.get("hand", ""))
    moves = seen.keyed.get((row.round, row.seat, hand, meter))
    if moves is None:  # keyed before the period began
        found = conn.execute(_KEYED_BEFORE, (row.seq, row.round, row.seat, hand, meter)
                             ).fetchone()
        moves = (int(found[0]), int(found[1])) if found and found[0] is not None else None
    return Award(row.seq, row.at, source, source, row.round, row.seat, hand, meter, units,
                 str(data.get("by", "")), None if moves is None else moves[0],
                 None if moves is None else moves[1],
                 seen.slips.get(f"{row.round}:{row.seat}:{hand}"))
