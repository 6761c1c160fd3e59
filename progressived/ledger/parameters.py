"""The table's contribution parameters, as the ledger records them.

An auditor checks the meter rate, reserve rate, seed, limit, wager and paytable against the
approved figures from the ledger alone, so ``ledger_created`` carries them (``parameters``)
and every change is a ``parameter_changed`` row whose ``changes`` map each key to its
``old`` and ``new`` value (a key no longer there: ``"removed": true``). The keys and values
are those of the daemon's reload (``progressived.daemon.operator.param_changes``), so one
reader folds both kinds of row. When a ledger is continued with parameters that differ from
the last recorded ones (the daemon started with an edited configuration, ``simulate
--ledger`` with other flags), the ledger journals the difference before writing anything
else.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from progressived.core.params import TableParams
from progressived.ledger.errors import LedgerError

# The reason of a parameter_changed row the ledger writes itself when it is opened.
AT_OPEN_REASON = "the ledger was opened with parameters that differ from the last recorded ones"


def describe(params: TableParams) -> dict[str, Any]:
    """Every progressive parameter, flat and JSON-ready (amounts in units, rates as text)."""
    out: dict[str, Any] = {
        "paytable": params.paytable.id,
        "wager_units": params.wager_units,
        "policy": params.policy.value,
        "award_order": params.award_order.value,
        "seats": params.seats,
    }
    for m in params.meters:
        if m.link is not None:  # the link records its meters' figures
            out[f"meters.{m.id}.link"] = m.link
            if m.link_meter_id != m.id:  # recorded only when the link names it otherwise
                out[f"meters.{m.id}.link_meter"] = m.link_meter_id
            continue
        out[f"meters.{m.id}.seed_units"] = params.reset_seed(m.id)
        out[f"meters.{m.id}.rate"] = str(m.rate)
        out[f"meters.{m.id}.reserve_rate"] = str(m.reserve_rate)
        out[f"meters.{m.id}.limit_units"] = m.limit
        out[f"meters.{m.id}.above_limit"] = m.above_limit.value
    return out


def changes(before: dict[str, Any] | None, after: dict[str, Any]) -> dict[str, Any]:
    """``{key: {"old", "new"}}`` of every key of ``after`` whose value differs (``old`` is
    ``None`` for a key never recorded; ``before`` ``None``: nothing recorded at all), and
    ``{key: {"old", "new": None, "removed": True}}`` of every key of ``before`` that
    ``after`` no longer has (a meter made linked loses its seed and rates, a meter dropped
    all its keys): ``new`` alone could not tell a removed key from one set to ``null``
    (``limit_units``: no limit)."""
    known = before or {}
    changed: dict[str, Any] = {
        k: {"old": known.get(k), "new": v} for k, v in after.items() if known.get(k) != v
    }
    for k, v in known.items():
        if k not in after:
            changed[k] = {"old": v, "new": None, "removed": True}
    return changed


def last_recorded(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """The parameters in force after the last row: ``ledger_created``'s, then every
    ``parameter_changed`` applied in order. ``None`` when ``ledger_created`` recorded none
    (a ledger made before this was recorded)."""
    current: dict[str, Any] | None = None
    for kind, data in conn.execute(
        "SELECT kind, data FROM journal WHERE kind IN ('ledger_created', 'parameter_changed') "
        "ORDER BY seq"
    ):
        detail = json.loads(data)
        if kind == "ledger_created":
            recorded = detail.get("parameters")
            current = dict(recorded) if isinstance(recorded, dict) else None
            continue
        changed = detail.get("changes")
        if not isinstance(changed, dict):
            continue
        if current is None:
            current = {}
        for key, change in changed.items():
            if isinstance(change, dict) and change.get("removed") is True:
                current.pop(key, None)
            elif isinstance(change, dict) and "new" in change:
                current[key] = change["new"]
    return current


def at_open(conn: sqlite3.Connection, params: TableParams, path: Path) -> dict[str, Any] | None:
    """The ``parameter_changed`` detail to journal when a ledger is opened with ``params``
    (``None`` when they are the last recorded ones)."""
    try:
        recorded = last_recorded(conn)
    except (sqlite3.Error, ValueError) as exc:
        raise LedgerError(f"ledger {path}: cannot read its recorded parameters: {exc}") from None
    changed = changes(recorded, describe(params))
    return {"changes": changed, "reason": AT_OPEN_REASON} if changed else None
