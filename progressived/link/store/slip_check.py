"""A linked table's payout slips against the link's ledger: every linked award the table
paid a slip for is a claim the link paid, of the same amount, and every claim the link
paid this table has a live slip (``progressivectl slips reconcile --link-db``).

The link names a claim ``r<ROUND>-s<SEAT>-<SEQ>`` (the table's link outbox,
progressived/daemon/link_out.py) with its hand; a slip names its award ``ROUND:SEAT:HAND``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from progressived.core.money import display
from progressived.ledger.slip_reads import StoredSlip
from progressived.link.store.reports import hits

_CLAIM = re.compile(r"^r(\d+)-s(\d+)-\d+$")


def linked_differences(
    slips: list[StoredSlip],
    link_db: Path,
    table_id: str,
    *,
    since: str | None = None,
    until: str | None = None,
) -> tuple[int, list[str]]:
    """How many linked slips were compared, and each difference (one line each).

    ``slips`` are the table's slips of the period; a paid claim of the link counts when the
    link applied it within the same period (its ``at``)."""
    live = [s for s in slips if s.void is None and s.slip.link is not None]
    paid: dict[tuple[int, int, str], list[tuple[str, int, str]]] = defaultdict(list)
    for row in hits(link_db, last=2**31):
        match = _CLAIM.match(str(row["claim"]))
        if row["table_id"] != table_id or row["state"] != "paid" or match is None:
            continue
        key = (int(match.group(1)), int(match.group(2)), str(row["hand"]))
        paid[key].append((str(row["claim"]), int(row["units"]), str(row["at"] or "")))
    out: list[str] = []
    seen: set[tuple[int, int, str]] = set()
    for stored in live:
        slip = stored.slip
        key = (slip.round, slip.seat, slip.hand)
        seen.add(key)
        claims = paid.get(key, [])
        if not claims:
            out.append(f"slip {slip.serial} ({slip.award}): the link paid no such claim")
        elif [units for _, units, _ in claims] != [slip.units]:
            amounts = ", ".join(display(units) for _, units, _ in claims)
            out.append(f"slip {slip.serial} pays {display(slip.units)}, the link paid {amounts}")
    for key, paid_claims in sorted(paid.items()):
        for claim, units, at in paid_claims:
            inside = (since is None or at >= since) and (until is None or at[: len(until)] <= until)
            if key not in seen and inside:
                out.append(
                    f"link claim {claim} ({key[0]}:{key[1]}:{key[2]}, {display(units)}) "
                    "has no live slip at the table"
                )
    return len(live), out
