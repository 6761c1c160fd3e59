"""What the link controller shows of itself: the control socket's ``status`` and the health
gauges (docs/link.md, "The link controller" and "The standby controller and two brokers").

Each view renders a :class:`~progressived.link.runtime.snapshot.ControllerSnapshot` and
reads nothing else: the metrics thread calls them while the event loop goes on.

A standby holds no book (it has not read the ledger: the active controller writes it), so
its status has the role, the lease and the ledger's reachability, and empty ``meters`` and
``tables``; its ``ledger`` names no head.
"""

from __future__ import annotations

from typing import Any

from progressived.core.money import cents, display
from progressived.link.runtime.inbox import STRANGERS
from progressived.link.runtime.leadership import Role
from progressived.link.runtime.refusals import NOT_A_MEMBER
from progressived.link.runtime.snapshot import ControllerSnapshot

HEARD_WINDOW_S = 60.0  # a table is "heard" if it sent anything this recently


def health(s: ControllerSnapshot, now: float) -> dict[str, float]:
    """The gauges ``progressive_link_<name>`` (docs/link.md); ``now``: monotonic."""
    return {
        "broker_connected": float(s.broker.connected),
        "brokers_connected": float(s.broker.connected_count),
        "ledger_ok": float(s.ledger_error is None),
        "tables_heard": float(sum(now - t <= HEARD_WINDOW_S for t in s.heard.values())),
        "inbox_depth": float(s.inbox.depth),
        "inbox_high_water": float(s.inbox.high_water),
        "active": float(s.lease.role is Role.ACTIVE),
    }


def _label(lane: str) -> str:
    return NOT_A_MEMBER if lane == STRANGERS else lane


def fairness(s: ControllerSnapshot) -> dict[str, Any]:
    """Each table's share: what waits and was dropped in the inbox (this term), refusals
    by table and code, and refusal or resend answers held back (docs/link.md, "Fair share")."""
    by_table: dict[str, dict[str, int]] = {}
    for (table, code), n in sorted(s.refusals.items()):
        by_table.setdefault(table, {})[code] = n
    inbox = s.inbox
    return {
        "inbox": {
            "depth": inbox.depth,
            "high_water": inbox.high_water,
            "lane_max": inbox.lane_max,
            "waiting": {_label(k): n for k, n in sorted(inbox.waiting.items())},
            "dropped": {_label(k): n for k, n in sorted(inbox.dropped.items())},
        },
        "refusals": by_table,
        "answers_dropped": dict(sorted(s.answers_dropped.items())),
    }


def _book(
    s: ControllerSnapshot, now: float
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Meters, tables and the ledger's head, from the book (empty on a standby)."""
    book = s.book
    if book is None:
        return {}, {}, {"head_seq": None, "head_hash": None}
    meters: dict[str, Any] = {}
    for meter_id, m in book.meters.items():
        meters[meter_id] = {
            "display": display(m.units),
            "units": m.units,
            "epoch": m.epoch,
            "reserve_cents": cents(m.reserve),
            "pending_cents": cents(m.pending),
            "paid_cents": cents(m.paid),
        }
    tables = {}
    for table, hwm in book.hwm.items():
        heard = s.heard.get(table)
        tables[table] = {
            "hwm": hwm,
            "heard_s_ago": None if heard is None else round(now - heard, 1),
        }
    return meters, tables, {"head_seq": book.head_seq, "head_hash": book.head_hash}


def status(s: ControllerSnapshot, now: float) -> dict[str, Any]:
    """The control socket's ``status`` of a link controller (docs/link.md)."""
    meters, tables, head = _book(s, now)
    active = s.book is not None
    return {
        "link": s.link,
        "version": s.version,
        "policy": s.policy,
        **s.lease.view(),
        "lseq": None if s.book is None else s.book.lseq,
        "meters": meters,
        "tables": tables,
        "messages": dict(s.counts),
        "unreadable": dict(s.unreadable),
        **fairness(s),
        "batches": s.batches,
        "broker": {
            "connected": s.broker.connected,
            "state": s.broker.state if active else "standby",
            "error": s.broker.detail if active else "a standby connects to no broker",
            "denied": dict(sorted(s.broker.denied.items())),
            "denied_total": s.broker.denied_total,
        },
        "brokers": [dict(view) for view in s.broker.brokers],
        "ledger": {"ok": s.ledger_error is None, "error": s.ledger_error or "", **head},
    }
