"""Read-only reports over a ledger: export, meters, hits.

All of them read through :func:`connect_readonly` inside one read transaction, so they
see one consistent moment of the ledger and never block the daemon (WAL readers do not
take write locks). Everything is computed from the journal and the balances table; no
configuration is needed, so an auditor can run them on a copied file.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from progressived.core.money import display, display_exact
from progressived.engine import accounts
from progressived.ledger import chain
from progressived.ledger.store import connect_readonly
from progressived.ledger.verify import meter_ids

COLUMNS = (
    "seq",
    "at",
    "table_id",
    "round",
    "seat",
    "kind",
    "category",
    "actor",
    "idem_key",
    "data",
    "prev_hash",
    "hash",
)


def _rows(conn: sqlite3.Connection, since: int) -> Iterator[dict[str, Any]]:
    """The journal rows after ``since`` as column -> value, read through sqlite-utils
    (imported here: only the export needs it), without its plugins: nothing installed
    beside the package may hook an auditor's connection to the ledger."""
    import sqlite_utils  # noqa: PLC0415

    db = sqlite_utils.Database(conn, execute_plugins=False)
    rows: Iterator[dict[str, Any]] = db.query(
        f"SELECT {', '.join(COLUMNS)} FROM journal WHERE seq > ? ORDER BY seq", [since]
    )
    yield from rows


def export(path: Path | str, out: TextIO, fmt: str, since: int = 0) -> int:
    """Write journal rows with ``seq > since`` as CSV or a JSON array; returns the count.

    CSV keeps ``data`` as the stored JSON text (so the hash can be recomputed from the
    export); JSON nests it as an object and adds nothing else.
    """
    if fmt not in ("csv", "json"):
        raise ValueError(f"unknown export format {fmt!r} (csv or json)")
    conn = connect_readonly(path)
    count = 0
    try:
        conn.execute("BEGIN")
        if fmt == "csv":
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(COLUMNS)
            for row in _rows(conn, since):
                writer.writerow(["" if row[c] is None else row[c] for c in COLUMNS])
                count += 1
        else:
            out.write("[")
            for item in _rows(conn, since):
                item["data"] = json.loads(item["data"])
                out.write(("\n" if count == 0 else ",\n") + json.dumps(item, sort_keys=True))
                count += 1
            out.write("\n]\n" if count else "]\n")
    finally:
        conn.close()
    return count



def head_fields(head: Sequence[Any] | None) -> dict[str, Any]:
    """``head_seq``, ``head_hash`` and ``as_of`` of a ``(seq, at, hash)`` row (None: empty)."""
    return {
        "head_seq": int(head[0]) if head else 0,
        "head_hash": str(head[2]) if head else chain.GENESIS,
        "as_of": head[1] if head else None,
    }


def meter_figures(balances: Mapping[str, int], meter: str) -> dict[str, Any]:
    """A meter's figures from the balances table (a table's and a link's ``meters`` alike)."""
    return {
        "display": display(balances.get(accounts.meter(meter), 0)),
        "units": balances.get(accounts.meter(meter), 0),
        "reserve_units": balances.get(accounts.reserve(meter), 0),
        "overflow_units": balances.get(accounts.overflow(meter), 0),
        "pending_units": balances.get(accounts.pending(meter), 0),
        "paid_attendant_units": balances.get(accounts.paid_attendant(meter), 0),
        "seed_funding_units": -balances.get(accounts.seed_funding(meter), 0),
    }

def meters(path: Path | str) -> dict[str, Any]:
    """The meters an operator or a regulator asks for, from the ledger alone."""
    conn = connect_readonly(path)
    try:
        conn.execute("BEGIN")
        balances = {str(a): int(u) for a, u in conn.execute("SELECT account, units FROM balances")}
        table_id = conn.execute("SELECT value FROM meta WHERE key = 'table_id'").fetchone()[0]
        head = conn.execute(
            "SELECT seq, at, hash FROM journal ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        counts = dict(
            conn.execute(
                "SELECT kind, count(*) FROM journal "
                "WHERE kind IN ('wager_locked', 'wager_refunded') GROUP BY kind"
            ).fetchall()
        )
        hands: list[dict[str, Any]] = []
        for kind, hand, meter, hits, units in conn.execute(
            "SELECT kind, json_extract(data, '$.hand'), json_extract(data, '$.meter'), "
            "count(*), sum(json_extract(data, '$.units')) FROM journal "
            "WHERE kind IN ('award_confirmed', 'tray_paid', 'envy_paid') "
            "GROUP BY 1, 2, 3 ORDER BY 2, 1, 3"
        ):
            source = {"award_confirmed": "meter", "tray_paid": "tray", "envy_paid": "envy"}[kind]
            hands.append(
                {
                    "hand": hand,
                    "source": source,
                    "meter": meter,
                    "hits": int(hits),
                    "units": int(units),
                    "display": display(int(units)),
                }
            )
    finally:
        conn.close()
    paid_table = balances.get(accounts.PAID_TRAY, 0) + balances.get(accounts.PAID_ENVY, 0)
    paid_attendant = sum(balances.get(accounts.paid_attendant(m), 0) for m in meter_ids(balances))
    wagers = counts.get("wager_locked", 0) - counts.get("wager_refunded", 0)
    return {
        "table_id": table_id,
        **head_fields(head),
        "progressive_in": wagers,
        "wagers_units": -balances.get(accounts.WAGERS, 0),
        "meters": {m: meter_figures(balances, m) for m in meter_ids(balances)},
        "hands": hands,
        "paid_table_units": paid_table,
        "paid_tray_units": balances.get(accounts.PAID_TRAY, 0),
        "paid_envy_units": balances.get(accounts.PAID_ENVY, 0),
        "paid_attendant_units": paid_attendant,
        "paid_total_units": paid_table + paid_attendant,
        "identity_gap_units": accounts.identity_gap(balances, meter_ids(balances)),
    }


def render_meters(report: dict[str, Any]) -> str:
    lines = [
        f"table {report['table_id']}  (ledger row {report['head_seq']}, {report['as_of']})",
        # Written down elsewhere, the head lets `ledger verify --head SEQ:HASH` catch a
        # consistent rewrite of the ledger's tail later (docs/ledger.md).
        f"head {report['head_seq']}:{report['head_hash']}",
        f"progressive in: {report['progressive_in']} wagers ({display(report['wagers_units'])})",
    ]
    for meter_id, m in report["meters"].items():
        lines.append(
            f"meter {meter_id}: {m['display']} (exact {display_exact(m['units'])})  "
            f"reserve {display_exact(m['reserve_units'])}  "
            f"overflow {display_exact(m['overflow_units'])}  "
            f"awaiting supervisor {display(m['pending_units'])}"
        )
    lines.append(
        f"paid by the table {display(report['paid_table_units'])} "
        f"(tray {display(report['paid_tray_units'])}, envy {display(report['paid_envy_units'])});"
        f" by an attendant {display(report['paid_attendant_units'])};"
        f" cumulative {display(report['paid_total_units'])}"
    )
    lines.append("hits and wins per hand:")
    lines.append(f"  {'hand':<22} {'paid from':<12} {'hits':>7} {'won':>16}")
    for h in report["hands"]:
        source = f"meter {h['meter']}" if h["source"] == "meter" else h["source"]
        lines.append(f"  {h['hand']:<22} {source:<12} {h['hits']:>7} {h['display']:>16}")
    if report["identity_gap_units"]:
        lines.append(f"WARNING: the accounting identity is off by {report['identity_gap_units']}")
    return "\n".join(lines)


_HITS = """
SELECT c.seq, c.at, c.table_id, c.round, c.seat,
       json_extract(c.data, '$.hand'), json_extract(c.data, '$.meter'),
       json_extract(c.data, '$.units'), json_extract(c.data, '$.by'),
       (SELECT json_array(json_extract(k.data, '$.meter_before'),
                          json_extract(k.data, '$.meter_after'))
          FROM journal k
         WHERE k.kind = 'award_keyed' AND k.seq < c.seq AND k.round = c.round
           AND k.seat = c.seat AND json_extract(k.data, '$.hand') = json_extract(c.data, '$.hand')
           AND json_extract(k.data, '$.meter') = json_extract(c.data, '$.meter')
         ORDER BY k.seq DESC LIMIT 1)
  FROM journal c
 WHERE c.kind = 'award_confirmed'
 ORDER BY c.seq DESC LIMIT ?
"""


def hits(path: Path | str, last: int = 25) -> list[dict[str, Any]]:
    """The last ``last`` meter hits (confirmed awards), newest first."""
    conn = connect_readonly(path)
    try:
        conn.execute("BEGIN")
        rows = conn.execute(_HITS, (last,)).fetchall()
    finally:
        conn.close()
    out = []
    for seq, at, table_id, rnd, seat, hand, meter, units, by, moves in rows:
        before, after = json.loads(moves) if moves else (None, None)
        out.append(
            {
                "seq": seq,
                "at": at,
                "table_id": table_id,
                "round": rnd,
                "seat": seat,
                "hand": hand,
                "meter": meter,
                "units": units,
                "amount": display(units),
                "meter_before_units": before,
                "meter_after_units": after,
                "confirmed_by": by,
            }
        )
    return out


def render_rows(header: str, lines: Iterable[str], empty: str) -> str:
    """A report's text: its header line, then one line per row, or ``empty`` when none
    (the table's and the link's ``ledger hits``)."""
    body = list(lines)
    return "\n".join([header, *(body or [empty])])


def render_hits(rows: list[dict[str, Any]]) -> str:
    def line(r: dict[str, Any]) -> str:
        before = "" if r["meter_before_units"] is None else display(r["meter_before_units"])
        after = "" if r["meter_after_units"] is None else display(r["meter_after_units"])
        return (
            f"{r['at']:<27} {r['table_id']:<10} {r['seat']:>4} {r['hand']:<16} "
            f"{r['amount']:>14} {before:>14} {after:>14}  {r['confirmed_by']}"
        )

    header = (
        f"{'time':<27} {'table':<10} {'seat':>4} {'hand':<16} {'amount':>14} "
        f"{'meter before':>14} {'meter after':>14}  confirmed by"
    )
    return render_rows(header, map(line, rows), "(no meter hits)")
