"""The accountant's reconciliation of payout slips against the awards in a table's ledger.

Read-only, over one read transaction. It holds when:

* every serial of the series is accounted for: the numbers issued are 1, 2, ... N with no
  gap and none twice, each serial once, each void names a slip issued, once;
* every award paid in the period (``award_confirmed``, ``tray_paid``, ``envy_paid``) has
  exactly one live slip, and every live slip of the period pays an award of the ledger;
* each live slip's amount is its award's, to the unit;
* per meter, the live meter slips add up to the meter's decrease for hits, to the cent: the
  ``paid_attendant:M`` postings of the period (a linked meter's are the link's:
  :mod:`progressived.link.store.slip_check` compares those with the link's ledger).

Each difference is one line naming the serial, the award or the meter.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from progressived.core.money import UNITS_PER_CENT, display
from progressived.ledger.errors import LedgerError
from progressived.ledger.readonly import connect_readonly
from progressived.slips.issue import envy_award_id, meter_award_id
from progressived.slips.slip import ISSUED, VOIDED

AWARDS = ("award_confirmed", "tray_paid", "envy_paid")


@dataclass
class Reconciliation:
    """What was compared and every difference found (``ok`` when there is none)."""

    table_id: str = ""
    issued: int = 0
    voided: int = 0
    reissued: int = 0
    awards: int = 0
    live: int = 0
    linked: int | None = None  # linked slips compared with the link's ledger (--link-db)
    per_meter: dict[str, dict[str, int]] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "issued": self.issued,
            "voided": self.voided,
            "reissued": self.reissued,
            "awards": self.awards,
            "live": self.live,
            "linked_checked": self.linked,
            "meters": self.per_meter,
            "differences": list(self.differences),
        }

    def render(self) -> str:
        head = (
            f"slips: {self.issued} issued ({self.reissued} reissues), {self.voided} void, "
            f"{self.live} live; awards paid: {self.awards}"
        )
        meters = [
            f"meter {m}: slips {display(v['slips_units'])}, meter decrease for hits "
            f"{display(v['paid_units'])}"
            for m, v in sorted(self.per_meter.items())
        ]
        if self.linked is not None:
            meters.append(f"linked slips checked against the link's ledger: {self.linked}")
        verdict = ["reconciled: every serial accounted for, one live slip per award"]
        if not self.ok:
            verdict = [f"NOT reconciled: {len(self.differences)} difference(s)"]
            verdict += [f"  {d}" for d in self.differences]
        return "\n".join([head, *meters, *verdict])


def reconcile(path: Path, *, since: str | None = None, until: str | None = None) -> Reconciliation:
    conn = connect_readonly(path)
    try:
        conn.execute("BEGIN")
        report = _reconcile(conn, since, until)
        row = conn.execute("SELECT value FROM meta WHERE key = 'table_id'").fetchone()
        report.table_id = str(row[0]) if row is not None else ""
        return report
    except (sqlite3.Error, KeyError, ValueError, TypeError) as exc:
        raise LedgerError(f"{path}: cannot read its slips and awards: {exc}") from None
    finally:
        conn.close()


def _in(at: str, since: str | None, until: str | None) -> bool:
    return (since is None or at >= since) and (until is None or at[: len(until)] <= until)


def _reconcile(conn: sqlite3.Connection, since: str | None, until: str | None) -> Reconciliation:
    report = Reconciliation()
    diff = report.differences
    rows = conn.execute(
        "SELECT seq, at, kind, data FROM journal WHERE kind IN (?, ?, ?, ?, ?) ORDER BY seq",
        (*AWARDS, ISSUED, VOIDED),
    ).fetchall()
    issued: dict[str, dict[str, Any]] = {}
    issued_at: dict[str, str] = {}
    numbers: list[int] = []
    voids: Counter[str] = Counter()
    awards: dict[str, tuple[int, str | None]] = {}  # award id -> units, meter
    for _seq, at, kind, text in rows:
        data = json.loads(text)
        if kind == ISSUED:
            serial = data["serial"]
            if serial in issued:
                diff.append(f"serial {serial} issued twice")
            issued[serial], issued_at[serial] = data, at
            numbers.append(int(data["number"]))
            report.reissued += data.get("reissue_of") is not None
        elif kind == VOIDED:
            voids[data["serial"]] += 1
        elif _in(at, since, until):
            award = _award_id(kind, data)
            meter = data.get("meter") if kind == "award_confirmed" else None
            if award in awards:
                diff.append(f"award {award} paid twice")
            awards[award] = (int(data["units"]), meter)
    report.issued, report.voided, report.awards = len(issued), sum(voids.values()), len(awards)
    _series(numbers, diff)
    _voids(voids, issued, diff)
    live: dict[str, list[str]] = defaultdict(list)
    for serial, data in issued.items():
        if voids[serial] == 0 and _in(issued_at[serial], since, until):
            live[data["award"]].append(serial)
    report.live = sum(len(s) for s in live.values())
    _awards(awards, live, issued, diff)
    _meters(conn, report, issued, live, since, until)
    return report


def _voids(voids: Counter[str], issued: dict[str, dict[str, Any]], diff: list[str]) -> None:
    """Every void names a slip issued once, and voids it once."""
    for serial, count in sorted(voids.items()):
        if serial not in issued:
            diff.append(f"void of serial {serial}, which was never issued")
        elif count > 1:
            diff.append(f"serial {serial} voided {count} times")


def _awards(
    awards: dict[str, tuple[int, str | None]],
    live: dict[str, list[str]],
    issued: dict[str, dict[str, Any]],
    diff: list[str],
) -> None:
    """One live slip per paid award, of its amount; no live slip without a paid award."""
    for award, (units, _) in sorted(awards.items()):
        serials = live.get(award, [])
        if not serials:
            diff.append(f"award {award} ({display(units)}) has no live slip")
        elif len(serials) > 1:
            diff.append(f"award {award} has {len(serials)} live slips: {', '.join(serials)}")
        elif (paid := int(issued[serials[0]]["units"])) != units:
            diff.append(
                f"slip {serials[0]} pays {display(paid)}, its award {award} {display(units)}"
            )
    for award, serials in sorted(live.items()):
        if award not in awards:
            diff.append(f"slip {', '.join(serials)} pays award {award}, not paid in the ledger")


def _award_id(kind: str, data: dict[str, Any]) -> str:
    if kind == "envy_paid":
        return envy_award_id(data["round"], data["seat"], data["from_seat"], data["hand"])
    return meter_award_id(data["round"], data["seat"], data["hand"])


def _series(numbers: list[int], diff: list[str]) -> None:
    """Numbers 1..N in issue order, none missing, none twice."""
    seen = Counter(numbers)
    for number, count in sorted(seen.items()):
        if count > 1:
            diff.append(f"number {number} issued {count} times")
    missing = sorted(set(range(1, max(numbers, default=0) + 1)) - set(seen))
    if missing:
        diff.append(f"numbers missing from the series: {', '.join(map(str, missing[:20]))}")
    if numbers != sorted(numbers):
        diff.append("numbers out of order in the ledger")


def _meters(
    conn: sqlite3.Connection,
    report: Reconciliation,
    issued: dict[str, dict[str, Any]],
    live: dict[str, list[str]],
    since: str | None,
    until: str | None,
) -> None:
    """Per meter: the live meter slips against the meter's ``paid_attendant`` postings."""
    paid: dict[str, int] = defaultdict(int)
    for account, at, units in conn.execute(
        "SELECT p.account, j.at, p.units FROM postings p JOIN journal j USING (seq) "
        "WHERE p.account LIKE 'paid_attendant:%'"
    ):
        if _in(at, since, until):
            paid[account.split(":", 1)[1]] += int(units)
    slipped: dict[str, int] = defaultdict(int)
    for serials in live.values():
        for serial in serials:
            data = issued[serial]
            # A linked meter's money is the link's: its payouts are in the link's ledger
            # (``--link-db``, progressived.link.store.slip_check), not in this one.
            if data["source"] == "meter" and data.get("link") is None:
                slipped[data["meter"]] += int(data["units"])
    for meter in sorted(set(paid) | set(slipped)):
        report.per_meter[meter] = {"slips_units": slipped[meter], "paid_units": paid[meter]}
        if slipped[meter] // UNITS_PER_CENT != paid[meter] // UNITS_PER_CENT:
            report.differences.append(
                f"meter {meter}: live slips {display(slipped[meter])}, but the meter paid "
                f"{display(paid[meter])} for hits"
            )
