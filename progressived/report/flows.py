"""What moved each meter's liability during a period, from the period's postings.

One SQL pass over the period's ``postings`` (plain integer columns, joined to their rows by
primary key) grouped by minute, by what the row is (its kind; a link row with a
``linked_wagers`` leg is a contribution or its reversal) and by account. Memory is bounded
by the period's minutes, never by its rows. The postings table is the hashed rows' own
postings, leg by leg: verify over the period (:mod:`progressived.report.check`) checks
exactly that, so a report whose verify passed has its flows from the hash-chained rows.

Per meter M the liability is what the rules say is owed to players: the meter, its reserve
(the next reset's money), any overflow and awards keyed but not yet paid (holders
``meter:M``, ``reserve:M``, ``overflow:M``, ``award_pending:M``). A leg on a holder of M
is money in or out of that liability; the other side of the row says what it was:

* **contributions** — a holder leg of a wager row (``wager_locked``, ``wager_refunded`` of a
  void, a linked table's contribution, the link's ``contribution`` and ``reversal``);
* **seeds/resets** — ``seed_funding:M`` (the house funds a meter's first amount and each
  reset after a 100% award; a rejected award's reset given back is negative);
* **awards paid** — ``paid_attendant:M`` (an attendant paid a confirmed award);
* **adjustments** — ``adjustments:M`` (``meter-adjust``) and holder legs of
  ``meter_transferred`` (``meter-transfer``, one meter's loss another's gain).

Moves inside M's liability (meter to pending when an award is keyed, reserve to meter at a
reset) change no total and are not flows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

HOLDERS = ("meter", "reserve", "overflow", "award_pending")
CONTRIBUTING = frozenset(
    {"wager_locked", "wager_refunded", "linked_contribution", "contribution", "reversal"}
)
TRANSFER = "meter_transferred"

# A posting's time, to the minute (``2026-11-28T21:14``) or to the quarter hour
# (``2026-11-28T21:1`` + ``5`` for :45): every zone's offset is a whole number of quarter
# hours, so either maps onto local hours exactly.
MINUTE = "substr(j.at, 1, 16)"
QUARTER_HOUR = ("substr(j.at, 1, 14) || (CAST(substr(j.at, 15, 2) AS INTEGER) / 15 * 15 / 10)"
                " || (CAST(substr(j.at, 15, 2) AS INTEGER) / 15 * 15 % 10)")
_FLOWS = """
SELECT {when} AS moment,
       CASE WHEN j.kind != 'link_applied' THEN j.kind
            WHEN EXISTS (SELECT 1 FROM postings w WHERE w.seq = p.seq
                            AND w.account GLOB 'linked_wagers:*') THEN 'contribution'
            ELSE 'link_applied' END AS what,
       p.account, sum(p.units), count(*)
  FROM postings p JOIN journal j ON j.seq = p.seq
 WHERE p.seq > ? AND p.seq <= ? AND p.account GLOB '*:*'
 GROUP BY moment, what, p.account
"""


@dataclass
class MeterFlows:
    """One meter's flows over the period, in units (positive: into the liability)."""

    contributions: int = 0
    seeds: int = 0
    seed_rows: int = 0
    paid: int = 0  # out of the liability
    paid_rows: int = 0
    adjustments: int = 0  # meter-adjust, signed
    transfers: int = 0  # meter-transfer, signed
    wagered: int = 0  # a link's linked wagers on this meter (a table's wagers are its own)
    holders: int = 0  # every holder leg, whatever the row (a check on the classification)
    # (bucket index) -> [meter delta, reserve delta], for the plots
    series: dict[int, list[int]] = field(default_factory=dict)
    hourly: dict[datetime, int] = field(default_factory=dict)  # local hour -> contributed

    @property
    def unexplained(self) -> int:
        """Holder legs none of the classes explain (0 unless a row does not balance)."""
        explained = self.contributions + self.seeds - self.paid + self.adjustments
        return self.holders - explained - self.transfers


Bucket = Callable[[str], tuple[int, datetime]]  # a UTC minute -> (plot bucket, local hour)


def flows(
    conn: sqlite3.Connection, after: int, last: int, bucket: Bucket, *, fine: bool = True
) -> dict[str, MeterFlows]:
    """Every meter's flows over rows ``after+1..last``, timed to the minute (``fine``) or
    to the quarter hour (a long period: fewer groups, the same hours)."""
    meters: dict[str, MeterFlows] = {}
    seen_minute, where = "", (0, datetime.min)
    query = _FLOWS.format(when=MINUTE if fine else QUARTER_HOUR)
    for minute, what, account, total, legs in conn.execute(query, (after, last)):
        prefix, _, meter = str(account).partition(":")  # wagers, the tray...: not selected
        m = meters.get(meter)
        if m is None:
            m = meters[meter] = MeterFlows()
        units = int(total)
        if prefix in HOLDERS:
            m.holders += units
            if minute != seen_minute:
                seen_minute, where = minute, bucket(str(minute))
            if what in CONTRIBUTING:
                m.contributions += units
                m.hourly[where[1]] = m.hourly.get(where[1], 0) + units
            elif what == TRANSFER:
                m.transfers += units
            if prefix in ("meter", "reserve"):
                moved = m.series.setdefault(where[0], [0, 0])
                moved[prefix == "reserve"] += units
        elif prefix == "seed_funding":
            m.seeds -= units
            m.seed_rows += int(legs)
        elif prefix == "adjustments":
            m.adjustments -= units
        elif prefix == "paid_attendant":
            m.paid += units
            m.paid_rows += int(legs)
        elif prefix == "linked_wagers":
            m.wagered -= units
    return meters


def wagers(conn: sqlite3.Connection, after: int, last: int, link: bool) -> dict[str, int]:
    """Wagers that contributed in the period, net of voids: a table's per table (every local
    meter), a link's per linked meter (its contribution messages' counts, less the counts of
    the contributions its reversals undid). Keyed ``*`` on a table."""
    if not link:
        counts = dict(
            conn.execute(
                "SELECT kind, count(*) FROM journal WHERE kind IN ('wager_locked', "
                "'wager_refunded') AND seq > ? AND seq <= ? GROUP BY kind",
                (after, last),
            ).fetchall()
        )
        return {"*": int(counts.get("wager_locked", 0)) - int(counts.get("wager_refunded", 0))}
    out: dict[str, int] = {}
    for meter, count in conn.execute(
        "SELECT json_extract(w.value, '$.meter'), sum(json_extract(w.value, '$.count')) "
        "FROM journal j, json_each(j.data, '$.message.wagers') w "
        "WHERE j.kind = 'link_applied' AND j.seq > ? AND j.seq <= ? "
        "AND json_extract(j.data, '$.message.type') = 'contribution' "
        "AND json_extract(j.data, '$.result.status') = 'applied' GROUP BY 1",
        (after, last),
    ):
        out[str(meter)] = int(count)
    for seq, of in conn.execute(
        "SELECT seq, json_extract(data, '$.message.of') FROM journal WHERE kind = "
        "'link_applied' AND seq > ? AND seq <= ? AND json_extract(data, '$.message.type') = "
        "'reversal' AND json_extract(data, '$.result.status') = 'applied'",
        (after, last),
    ).fetchall():
        # The reversed contribution is among its table's last few: read back from here.
        for meter, count in conn.execute(
            "SELECT json_extract(w.value, '$.meter'), json_extract(w.value, '$.count') FROM "
            "(SELECT data FROM journal WHERE kind = 'link_applied' AND seq < ? AND "
            "json_extract(data, '$.message.id') = ? AND json_extract(data, '$.message.type') "
            "= 'contribution' ORDER BY seq DESC LIMIT 1) c, "
            "json_each(c.data, '$.message.wagers') w",
            (seq, of),
        ):
            out[str(meter)] = out.get(str(meter), 0) - int(count)
    return out


_MEMBERS = """
SELECT substr(j.idem_key, 1, instr(j.idem_key, ':') - 1) AS member, p.account, sum(p.units)
  FROM postings p JOIN journal j ON j.seq = p.seq
 WHERE p.seq > ? AND p.seq <= ? AND j.kind = 'link_applied'
   AND (p.account GLOB 'linked_wagers:*' OR p.account GLOB 'meter:*'
        OR p.account GLOB 'reserve:*' OR p.account GLOB 'overflow:*')
   AND EXISTS (SELECT 1 FROM postings w WHERE w.seq = p.seq AND w.account GLOB 'linked_wagers:*')
 GROUP BY member, p.account
"""


def members(conn: sqlite3.Connection, after: int, last: int) -> dict[tuple[str, str], list[int]]:
    """A link's contributions by member table: (meter, table) -> [wagered, contributed], in
    units, net of reversals. A row's table is its idempotency key's (``TABLE:SEQ``)."""
    out: dict[tuple[str, str], list[int]] = {}
    for member, account, total in conn.execute(_MEMBERS, (after, last)):
        prefix, _, meter = str(account).partition(":")
        figures = out.setdefault((meter, str(member)), [0, 0])
        if prefix == "linked_wagers":
            figures[0] -= int(total)
        else:
            figures[1] += int(total)
    return out
