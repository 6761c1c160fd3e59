"""``progressivectl meters`` and ``hits`` on a link ledger: the linked meters and the claims.

Read-only and configuration-free like the table's reports (progressived.ledger.reports):
the meters come from the balances table, the claims from the book rebuilt from the rows
(the replay ``ledger verify`` checks), in the link's log order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from progressived.core.money import display, display_exact
from progressived.ledger.readonly import connect_readonly
from progressived.ledger.reports import head_fields, meter_figures, render_rows
from progressived.ledger.verify import meter_ids
from progressived.link.core import params as lp
from progressived.link.store import audit


def meters(path: Path | str) -> dict[str, Any]:
    """Each linked meter: units, reserve, overflow, pending, paid, contributed, the identity."""
    conn = connect_readonly(path)
    try:
        conn.execute("BEGIN")
        balances = {str(a): int(u) for a, u in conn.execute("SELECT account, units FROM balances")}
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        head = conn.execute(
            "SELECT seq, at, hash FROM journal ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        counts = {
            str(t): int(n)
            for t, n in conn.execute(
                "SELECT json_extract(data, '$.table'), count(*) FROM journal "
                "WHERE kind = 'link_applied' GROUP BY 1 ORDER BY 1"
            )
        }
    finally:
        conn.close()
    ids = meter_ids(balances)
    gaps = audit.identity_gaps(balances, ids)
    return {
        "ledger_kind": "link",
        "link_id": meta.get("link_id"),
        **head_fields(head),
        "messages_applied": counts,
        "meters": {
            m: {
                **meter_figures(balances, m),
                "wagers_units": -balances.get(lp.linked_wagers(m), 0),
                "house_retained_units": -balances.get(lp.house_retained(m), 0),
                "identity_gap_units": gaps[m],
            }
            for m in ids
        },
        "identity_gap_units": sum(abs(g) for g in gaps.values()),
    }


def render_meters(report: dict[str, Any]) -> str:
    lines = [
        f"link {report['link_id']}  (ledger row {report['head_seq']}, {report['as_of']})",
        f"head {report['head_seq']}:{report['head_hash']}",
    ]
    for meter_id, m in report["meters"].items():
        lines.append(
            f"meter {meter_id}: {m['display']} (exact {display_exact(m['units'])})  "
            f"reserve {display_exact(m['reserve_units'])}  "
            f"overflow {display_exact(m['overflow_units'])}  "
            f"pending {display(m['pending_units'])}  paid {display(m['paid_attendant_units'])}  "
            f"wagers {display(m['wagers_units'])} (net of reversals)"
        )
        retained = -m["house_retained_units"]  # what the house kept (a positive balance)
        funded = m["seed_funding_units"] + m["wagers_units"] - retained
        held = (
            m["units"] + m["reserve_units"] + m["overflow_units"] + m["pending_units"]
            + m["paid_attendant_units"]
        )
        lines.append(
            f"  identity: seed funding {display_exact(m['seed_funding_units'])} + wagers "
            f"{display_exact(m['wagers_units'])} - house retained "
            f"{display_exact(retained)} = {display_exact(funded)}; "
            f"held + paid {display_exact(held)}; gap {m['identity_gap_units']} units"
        )
    for table, count in report["messages_applied"].items():
        lines.append(f"  table {table}: {count} messages that consumed a sequence")
    if report["identity_gap_units"]:
        lines.append(f"WARNING: the identity is off by {report['identity_gap_units']} units")
    return "\n".join(lines)


def hits(path: Path | str, last: int = 25) -> list[dict[str, Any]]:
    """The last ``last`` claims in the link's log order (oldest first), as the book has them."""
    conn = connect_readonly(path)
    try:
        conn.execute("BEGIN")
        head = int(conn.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])
        _params, state = audit.state_of(conn, head)
        at = {
            (str(t), str(c)): str(a)
            for t, c, a in conn.execute(
                "SELECT json_extract(data, '$.table'), json_extract(data, '$.message.claim'), at "
                "FROM journal WHERE kind = 'link_applied' "
                "AND json_extract(data, '$.message.type') = 'claim'"
            )
        }
    finally:
        conn.close()
    claims = sorted(state.claims.values(), key=lambda c: c.order)[-last:]
    return [
        {
            "order": c.order,
            "at": at.get((c.table, c.claim)),
            "table_id": c.table,
            "claim": c.claim,
            "seat": c.seat,
            "hand": c.hand,
            "meter": c.meter,
            "units": c.units,
            "amount": display(c.units),
            "state": c.state,
            "group": c.group,
        }
        for c in claims
    ]


def render_hits(rows: list[dict[str, Any]]) -> str:
    header = (
        f"{'order':>6} {'time':<25} {'table':<10} {'seat':>4} {'hand':<16} {'amount':>14}  state"
    )
    lines = (
        f"{r['order']:>6} {r['at'] or '':<25} {r['table_id']:<10} {r['seat']:>4} "
        f"{r['hand']:<16} {r['amount']:>14}  {r['state']}"
        for r in rows
    )
    return render_rows(header, lines, "(no claims)")
