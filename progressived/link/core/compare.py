"""``link reconcile``'s comparisons (pure): the link's rows against one table's.

:mod:`progressived.link.store.reconcile` reads the ledgers; here the link's ``link_applied`` rows
and the replayed book meet a table's ``link_sent`` and ``link_result`` rows (docs/link.md,
"Reconciling"). Every disagreement is a :class:`Difference`; a message sent and not yet
answered (or answered at the link, the answer not yet journaled at the table) is in flight,
which is not a difference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from progressived.link.core.state import ClaimState

# What a difference is about (the JSON ``kind``); docs/link.md lists them.
KINDS = (
    "ledger-broken",  # a ledger's own check (ledger verify) failed
    "not-a-member",  # a table ledger of a table the link does not list
    "missing-at-table",  # the link applied a message the table never journaled sending
    "missing-at-link",  # the table journaled a final result the link has no row for
    "id-differs",
    "message-differs",  # the link applied other content than the table sent
    "result-differs",  # the table journaled another result than the link stored
    "contribution-differs",  # per table and meter, units applied less reversed
    "award-differs",  # a claim's award (units, state) at the table and at the link
    "award-missing",
    "witness-table",  # a table head the link witnessed is not in the table's chain
    "witness-link",  # a link head a table witnessed is not in the link's chain
)


@dataclass(frozen=True, slots=True)
class Difference:
    kind: str
    table: str | None
    seq: int | None
    message: str
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "table": self.table,
            "seq": self.seq,
            "message": self.message,
            **self.detail,
        }

    def __str__(self) -> str:
        where = (
            ""
            if self.table is None
            else f" {self.table}" + ("" if self.seq is None else f" seq {self.seq}")
        )
        return f"{self.kind}{where}: {self.message}"


@dataclass
class LinkSide:
    """The link's rows for one table: ``applied[seq]`` is a ``link_applied`` row's data."""

    applied: dict[int, dict[str, Any]] = field(default_factory=dict)
    refused: set[tuple[int, str]] = field(default_factory=set)  # (seq, code)
    claims: dict[str, ClaimState] = field(default_factory=dict)


@dataclass
class TableSide:
    """One table's rows for this link: ``sent[seq]``, ``results[seq]`` (their data)."""

    table: str
    sent: dict[int, dict[str, Any]] = field(default_factory=dict)
    results: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Outcome:
    differences: list[Difference] = field(default_factory=list)
    in_flight: list[dict[str, Any]] = field(default_factory=list)
    contributions: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(
        self, kind: str, table: str | None, seq: int | None, message: str, **detail: Any
    ) -> None:
        self.differences.append(Difference(kind, table, seq, message, detail))


def compare(link: LinkSide, table: TableSide, out: Outcome) -> None:
    """Everything but the witnessed heads and the ledgers' own checks (reconcile.py)."""
    t = table.table
    settled: set[int] = set()
    for seq in sorted(set(link.applied) | set(table.sent) | set(table.results)):
        row, sent, result = link.applied.get(seq), table.sent.get(seq), table.results.get(seq)
        if sent is None:
            if row is not None:
                out.add(
                    "missing-at-table",
                    t,
                    seq,
                    f"the link applied {row['id']} (lseq {row['lseq']}), the table "
                    "journaled no link_sent for it",
                )
                settled.add(seq)
            else:
                out.add(
                    "missing-at-table",
                    t,
                    seq,
                    "the table journaled a link_result for a message it never sent",
                )
            continue
        if row is None:
            if result is None:
                out.in_flight.append(_flight(t, seq, sent, "unanswered"))
            elif int(result["result"].get("lseq", 0)) > 0 or not _refused(link, seq, result):
                out.add(
                    "missing-at-link",
                    t,
                    seq,
                    f"the table journaled a final {result['status']} result for "
                    f"{sent['id']}, the link has no row for it",
                )
                settled.add(seq)
            continue
        if sent["id"] != row["id"]:
            out.add(
                "id-differs",
                t,
                seq,
                f"the table sent id {sent['id']}, the link applied {row['id']}",
            )
        if sent["message"] != row["message"]:
            out.add(
                "message-differs", t, seq, f"{sent['id']}: {_diff(sent['message'], row['message'])}"
            )
        if result is None:
            out.in_flight.append(_flight(t, seq, sent, "answer-not-journaled"))
            continue
        settled.add(seq)
        stored = row["result"]
        mine = result["result"]
        if mine != stored:
            out.add("result-differs", t, seq, f"{sent['id']}: {_diff(mine, stored)}")
        elif (result.get("status"), result.get("code"), result.get("id")) != (
            stored["status"],
            stored["code"],
            stored["id"],
        ):
            out.add(
                "result-differs",
                t,
                seq,
                f"{sent['id']}: the link_result row's status, code or id differ from its result",
            )
    _contributions(link, table, settled, out)
    _awards(link, table, out)


def _refused(link: LinkSide, seq: int, result: Mapping[str, Any]) -> bool:
    """A refusal that consumed no sequence, journaled at the link as link_refused."""
    return result.get("status") == "refused" and (seq, result.get("code")) in link.refused


def _flight(table: str, seq: int, sent: Mapping[str, Any], state: str) -> dict[str, Any]:
    return {"table": table, "seq": seq, "id": sent["id"], "type": sent.get("type"), "state": state}


def _diff(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> str:
    keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
    parts = [f"{k} {mine.get(k)!r} at the table, {theirs.get(k)!r} at the link" for k in keys]
    return "; ".join(parts)[:400]


def _contributions(link: LinkSide, table: TableSide, settled: set[int], out: Outcome) -> None:
    """Per meter, the wager units applied less reversed, from each side's own rows."""
    at_link: dict[str, int] = {}
    for seq in settled & set(link.applied):
        for account, units in link.applied[seq]["postings"]:
            kind, _, meter = str(account).partition(":")
            if kind == "linked_wagers":
                at_link[meter] = at_link.get(meter, 0) - int(units)
    at_table: dict[str, int] = {}
    by_id = {s["id"]: s["message"] for s in table.sent.values()}
    for seq, sent in table.sent.items():
        result = table.results.get(seq)
        if seq not in settled or result is None or result.get("status") != "applied":
            continue
        message, sign = sent["message"], 1
        if message.get("type") == "reversal":
            message, sign = by_id.get(message.get("of"), {}), -1
        if message.get("type") == "contribution":
            for wagers in message.get("wagers", []):
                meter = str(wagers["meter"])
                at_table[meter] = at_table.get(meter, 0) + sign * int(wagers["units"])
    for meter in sorted(set(at_link) | set(at_table)):
        a, b = at_link.get(meter, 0), at_table.get(meter, 0)
        out.contributions[f"{table.table}/{meter}"] = {"link_units": a, "table_units": b}
        if a != b:
            out.add(
                "contribution-differs",
                table.table,
                None,
                f"meter {meter}: {b} units contributed at the table, {a} at the link "
                f"(difference {b - a})",
                meter=meter,
                table_units=b,
                link_units=a,
            )


def _awards(link: LinkSide, table: TableSide, out: Outcome) -> None:
    """Each claim's last award the table journaled against the link's book, to the unit."""
    last: dict[str, dict[str, Any]] = {}
    for seq in sorted(table.results):
        for award in table.results[seq]["result"].get("awards", []):
            last[str(award["claim"])] = award
    waiting = any(f["table"] == table.table for f in out.in_flight)
    t = table.table
    for claim_id, claim in sorted(link.claims.items()):
        award = last.get(claim_id)
        if award is None:
            if not waiting:
                out.add(
                    "award-missing",
                    t,
                    None,
                    f"claim {claim_id}: the link priced it ({claim.units} units, "
                    f"{claim.state}), the table journaled no award",
                )
            continue
        if claim.state == "pending" or (award.get("state") == "pending" and waiting):
            continue  # a split share may still change; the final one is compared
        if (int(award["units"]), award["state"]) != (claim.units, claim.state):
            out.add(
                "award-differs",
                t,
                None,
                f"claim {claim_id}: {award['units']} units {award['state']} at the table, "
                f"{claim.units} units {claim.state} at the link",
                claim=claim_id,
                table_units=int(award["units"]),
                link_units=claim.units,
            )
    for claim_id in sorted(set(last) - set(link.claims)):
        out.add(
            "award-missing",
            t,
            None,
            f"claim {claim_id}: the table journaled an award the link's book does not hold",
        )
