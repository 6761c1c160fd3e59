"""What the link controller shows of itself: the control socket's ``status`` and the health
gauges (docs/link.md, "The link controller" and "The standby controller and two brokers").

A standby holds no book (it has not read the ledger: the active controller writes it), so
its status has the role, the lease and the ledger's reachability, and empty ``meters`` and
``tables``; its ``ledger`` names no head.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from progressived.core.money import cents, display
from progressived.engine import accounts
from progressived.link.runtime.inbox import STRANGERS
from progressived.link.runtime.leadership import ACTIVE
from progressived.link.runtime.refusals import NOT_A_MEMBER

if TYPE_CHECKING:
    from progressived.link.runtime.controller import LinkController

HEARD_WINDOW_S = 60.0  # a table is "heard" if it sent anything this recently


def health(c: LinkController) -> dict[str, float]:
    """The gauges ``progressive_link_<name>`` (docs/link.md)."""
    now = time.monotonic()
    return {
        "broker_connected": float(c.mqtt.connected),
        "brokers_connected": float(c.mqtt.connected_count),
        "ledger_ok": float(c.ledger_error is None),
        "tables_heard": float(sum(now - t <= HEARD_WINDOW_S for t in c.heard.values())),
        "inbox_depth": float(c.mqtt.inbox.qsize()),
        "inbox_high_water": float(c.mqtt.inbox.high_water),
        "active": float(c.leadership.role == ACTIVE),
    }


def _label(lane: str) -> str:
    return NOT_A_MEMBER if lane == STRANGERS else lane


def fairness(c: LinkController) -> dict[str, Any]:
    """Each table's share: what waits and was dropped in the inbox (this term), refusals
    by table and code, and refusal or resend answers held back (docs/link.md, "Fair share").
    The metrics thread calls it too: each count is copied (one C call) before it is read."""
    inbox, refusals = c.mqtt.inbox, c.refusals
    by_table: dict[str, dict[str, int]] = {}
    for (table, code), n in sorted(dict(refusals.by_table).items()):
        by_table.setdefault(table, {})[code] = n
    return {
        "inbox": {
            "depth": inbox.qsize(),
            "high_water": inbox.high_water,
            "lane_max": inbox.lane_max,
            "waiting": {_label(k): n for k, n in sorted(inbox.depths().items())},
            "dropped": {_label(k): n for k, n in sorted(dict(inbox.dropped).items())},
        },
        "refusals": by_table,
        "answers_dropped": dict(sorted(dict(refusals.answers_dropped).items())),
    }


def _book(c: LinkController) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Meters, tables and the ledger's head, from the book (empty on a standby)."""
    j = c.journal
    if j is None:
        return {}, {}, {"head_seq": None, "head_hash": None}
    state, now = j.book, time.monotonic()
    meters: dict[str, Any] = {}
    for spec in c.params.meters:
        units = state.balances.get(accounts.meter(spec.id), 0)
        meters[spec.id] = {
            "display": display(units),
            "units": units,
            "epoch": state.epochs.get(spec.id, 0),
            "reserve_cents": cents(state.balances.get(accounts.reserve(spec.id), 0)),
            "pending_cents": cents(state.balances.get(accounts.pending(spec.id), 0)),
            "paid_cents": cents(state.balances.get(accounts.paid_attendant(spec.id), 0)),
        }
    tables = {}
    for table in sorted(c.params.tables):
        track = state.tables.get(table)
        heard = c.heard.get(table)
        tables[table] = {
            "hwm": 0 if track is None else track.hwm,
            "heard_s_ago": None if heard is None else round(now - heard, 1),
        }
    return meters, tables, {"head_seq": j.head.seq, "head_hash": j.head.hash}


def status(c: LinkController) -> dict[str, Any]:
    """The control socket's ``status`` of a link controller (docs/link.md)."""
    meters, tables, head = _book(c)
    session = c.mqtt.session
    j = c.journal
    return {
        "link": c.params.link_id,
        "version": c.version,
        "policy": c.params.policy.value,
        **c.leadership.view(),
        "lseq": None if j is None else j.book.lseq,
        "meters": meters,
        "tables": tables,
        "messages": dict(c.counts),
        "unreadable": dict(c.unreadable),
        **fairness(c),
        "batches": c.batches,
        "broker": {
            "connected": c.mqtt.connected,
            "state": session.state if j is not None else "standby",
            "error": session.detail if j is not None else "a standby connects to no broker",
            "denied": dict(sorted(session.denied.items())),
            "denied_total": session.denied_total,
        },
        "brokers": c.mqtt.views(),
        "ledger": {"ok": c.ledger_error is None, "error": c.ledger_error or "", **head},
    }
