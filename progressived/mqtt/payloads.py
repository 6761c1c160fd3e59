"""Topics and JSON payloads for the signs. Pure: no I/O.

Topic names and JSON keys are contracts with the signs (docs/mqtt.md):

* ``<prefix>/table/<table-id>/meter/<meter-id>`` — retained, QoS 1: the meter as a sign
  shows it;
* ``<prefix>/table/<table-id>/status`` — retained: online (with the daemon's ``boot`` id) /
  offline (the last will);
* ``<prefix>/table/<table-id>/event`` — QoS 1: what happened, each with its ledger ``seq``.

Every topic a controller writes carries its table id, so a broker ACL
(``pattern write <prefix>/table/%u/#``) confines each controller to its own table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, assert_never

from progressived.core.money import cents, display
from progressived.engine import TableState, accounts
from progressived.engine.events import (
    AwardApproved,
    AwardConfirmed,
    AwardKeyed,
    AwardReversed,
    EnvyPaid,
    Event,
    HandKeyed,
    HandUnkeyed,
    LateBet,
    RoundLocked,
    RoundReconciled,
    RoundVoided,
    TableClosed,
    TableOpened,
    TrayPaid,
)
from progressived.engine.meter_requests import ReserveAwards
from progressived.engine.state import link_closures


@dataclass(frozen=True, slots=True)
class Topics:
    prefix: str
    table_id: str

    def meter(self, meter_id: str) -> str:
        return meter_topic(self.prefix, self.table_id, meter_id)

    @property
    def status(self) -> str:
        return status_topic(self.prefix, self.table_id)

    @property
    def event(self) -> str:
        return event_topic(self.prefix, self.table_id)


def meter_topic(prefix: str, table_id: str, meter_id: str) -> str:
    """The retained meter topic: under the table, so only that table's controller may write it."""
    return f"{prefix}/table/{table_id}/meter/{meter_id}"


def status_topic(prefix: str, table_id: str) -> str:
    return f"{prefix}/table/{table_id}/status"


def event_topic(prefix: str, table_id: str) -> str:
    return f"{prefix}/table/{table_id}/event"


def dumps(payload: Mapping[str, Any]) -> str:
    """Compact, key-sorted JSON: the same payload always has the same bytes."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)


def meter_state(
    state: TableState,
    meter_id: str,
    board_online: bool = True,
    linked: bool = False,
    heard: bool = True,
) -> str:
    """``open``, ``pending`` (an award awaits the supervisor, or a claim awaits a linked
    meter's price) or ``closed``. The link down (``link-down``) or refusing (``link
    refused: CODE``) closes linked meters only; a linked meter whose value the table has
    not ``heard`` from the link yet is closed too (``waiting for link``), never an open
    $0.00."""
    if state.meter_pending(meter_id) or any(
        c.meter == meter_id
        for r in state.awaiting
        if isinstance(r, ReserveAwards)
        for c in r.claims
    ):
        return "pending"
    closed = state.closed if linked else state.closed - link_closures(state.closed)
    if closed or not board_online or (linked and not heard):
        return "closed"
    return "open"


# Closure reasons the meter names that no ``table_closed`` event carries (docs/mqtt.md).
BOARD_OFFLINE = "board offline"  # the same reason the daemon journals (daemon/board_input.py)
LEDGER_UNAVAILABLE = "ledger unavailable"  # the ledger refuses writes: nothing can be journaled
# A linked meter whose value the link has not published to this table yet (since the
# daemon started): shown closed with this reason, on that meter only.
WAITING_FOR_LINK = "waiting for link"


def pending_awards(state: TableState, meter_id: str) -> list[dict[str, Any]]:
    """The meter's awards awaiting the supervisor, in keyed order, as a late sign shows them."""
    return [
        {"seat": a.seat, "hand": a.hand, "cents": cents(a.units)}
        for a in state.pending
        if a.meter == meter_id
    ]


def closures(
    state: TableState, *, board_online: bool = True, ledger_ok: bool = True, heard: bool = True
) -> list[str]:
    """The open closures: every ``table_closed`` reason not yet ended by its ``table_opened``,
    plus what closes the progressive without an event (the board or the ledger gone, and on
    a linked meter not ``heard`` from the link yet, ``waiting for link``)."""
    reasons = set(state.closed)
    if not board_online:
        reasons.add(BOARD_OFFLINE)
    if not ledger_ok:
        reasons.add(LEDGER_UNAVAILABLE)
    if not heard:
        reasons.add(WAITING_FOR_LINK)
    return sorted(reasons)


def meter_payload(
    *,
    table_id: str,
    meter_id: str,
    units: int,
    seq: int,
    state: str,
    ts: str,
    pending: list[dict[str, Any]] | None = None,
    closed: list[str] | None = None,
) -> dict[str, Any]:
    """``pending`` and ``closed`` (added after 0.1.0) let a sign that connects late show the
    award awaiting the supervisor and why the progressive is closed from the retained meter
    alone; they are left out when not given (an older controller sends neither)."""
    out: dict[str, Any] = {
        "meter": meter_id,
        "table": table_id,
        "cents": cents(units),
        "display": display(units),
        "seq": seq,
        "state": state,
        "ts": ts,
    }
    if pending is not None:
        out["pending"] = pending
    if closed is not None:
        out["closed"] = closed
    return out


def status_payload(
    *,
    table_id: str,
    online: bool,
    ts: str = "",
    version: str = "",
    boot: str = "",
    head: tuple[int, str] | None = None,
) -> dict[str, Any]:
    """``boot`` names one run of the daemon: a sign that sees a new one restarts its ``seq``
    expectation, so a stale or forged high meter ``seq`` cannot freeze it. ``head`` is the
    ledger's head row (seq, hash) when the status was built: recorded by a subscriber, it
    is a witness that ``ledger verify --head SEQ:HASH`` checks the ledger against."""
    out: dict[str, Any] = {"table": table_id, "status": "online" if online else "offline"}
    if head is not None:
        out["head_seq"], out["head_hash"] = head
    if ts:
        out["ts"] = ts
    if version:
        out["version"] = version
    if boot:
        out["boot"] = boot
    return out


def _base(kind: str, table_id: str, seq: int, event: Event) -> dict[str, Any]:
    return {
        "kind": kind,
        "table": table_id,
        "seq": seq,
        "round": event.round,
        "seat": event.seat,
        "ts": event.at,
    }


def event_payload(table_id: str, seq: int, event: Event) -> dict[str, Any] | None:
    """The sign-facing form of an engine event, or ``None`` for events signs do not need.

    Amounts are whole cents (``*_cents``); ``seq`` is the event's ledger sequence number,
    so a subscriber recognises a repeat after a reconnect.
    """
    match event:
        case AwardKeyed() | AwardReversed() | AwardConfirmed() | AwardApproved():
            return _award_payload(table_id, seq, event)
        case HandKeyed() | HandUnkeyed() | EnvyPaid() | TrayPaid():
            return _hand_payload(table_id, seq, event)
        case RoundLocked(seats=seats):
            return {**_base("round_locked", table_id, seq, event), "seats": list(seats)}
        case RoundReconciled():
            return {
                **_base("round_reconciled", table_id, seq, event),
                "settlement": [
                    {
                        "seat": p.seat,
                        "hand": p.hand,
                        "source": p.source,
                        "cents": cents(p.units),
                        **({"from_seat": p.from_seat} if p.source == "envy" else {}),
                    }
                    for p in event.settlement
                ],
            }
        case RoundVoided():
            return {**_base("round_voided", table_id, seq, event), "by": event.by}
        case TableClosed(reason=reason):
            return {**_base("table_closed", table_id, seq, event), "reason": reason}
        case TableOpened(reason=reason):
            return {**_base("table_opened", table_id, seq, event), "reason": reason}
        case LateBet(present=present):
            return {**_base("late_bet", table_id, seq, event), "present": present}
    return None


def _award_payload(
    table_id: str, seq: int, event: AwardKeyed | AwardReversed | AwardConfirmed | AwardApproved
) -> dict[str, Any]:
    """A meter award keyed, reversed (rejected, unkeyed, repriced, voided) or confirmed."""
    match event:
        case AwardKeyed():
            return {
                **_base("award_keyed", table_id, seq, event),
                "hand": event.hand,
                "meter": event.meter,
                "cents": cents(event.units),
                "meter_before_cents": cents(event.meter_before),
                "meter_after_cents": cents(event.meter_after),
                "reset": bool(event.reset_seed),
            }
        case AwardReversed():
            kind = {"rejected": "award_rejected", "unkeyed": "award_unkeyed"}.get(
                event.reason, "award_reversed"
            )
            return {
                **_base(kind, table_id, seq, event),
                "hand": event.hand,
                "meter": event.meter,
                "cents": cents(event.units),
                "meter_before_cents": cents(event.meter_before),
                "meter_after_cents": cents(event.meter_after),
                "reason": event.reason,
            }
        case AwardConfirmed() | AwardApproved():
            return {
                **_base(event.kind, table_id, seq, event),
                "hand": event.hand,
                "meter": event.meter,
                "cents": cents(event.units),
                "by": event.by,
            }
        case _:
            assert_never(event)


def _hand_payload(
    table_id: str, seq: int, event: HandKeyed | HandUnkeyed | EnvyPaid | TrayPaid
) -> dict[str, Any]:
    """A hand paid by the table: keyed, unkeyed, an envy bonus, a tray payout."""
    match event:
        case HandKeyed():
            return {
                **_base("hand_keyed", table_id, seq, event),
                "hand": event.hand,
                "source": event.source,
                "cents": cents(event.units),
            }
        case HandUnkeyed():
            return {
                **_base("hand_unkeyed", table_id, seq, event),
                "hand": event.hand,
                "source": event.source,
                "cents": cents(event.units),
            }
        case EnvyPaid():
            return {
                **_base("envy", table_id, seq, event),
                "hand": event.hand,
                "from_seat": event.from_seat,
                "cents": cents(event.units),
            }
        case TrayPaid():
            return {
                **_base("tray_paid", table_id, seq, event),
                "hand": event.hand,
                "cents": cents(event.units),
            }
        case _:
            assert_never(event)


def system_payload(
    kind: str, table_id: str, seq: int, ts: str, detail: Mapping[str, Any]
) -> dict[str, Any]:
    """A system event a sign should show (board offline/online, errors, rejected keys)."""
    return {"kind": kind, "table": table_id, "seq": seq, "ts": ts, **detail}


# What a sign checks before it shows a message (docs/mqtt.md, "Malformed messages").
METER_STATES = ("open", "pending", "closed")
_DISPLAY = re.compile(r"\$[0-9,]+\.[0-9]{2}")
_ROUND = ("round", "seat")
_AWARD = ("hand", "meter", "cents")
_MOVED = (*_AWARD, "meter_before_cents", "meter_after_cents")
# The keys each known event kind must carry besides kind, table, seq and ts.
EVENT_KEYS: dict[str, tuple[str, ...]] = {
    "round_locked": (*_ROUND, "seats"),
    "award_keyed": (*_ROUND, *_MOVED, "reset"),
    "award_confirmed": (*_ROUND, *_AWARD, "by"),
    "award_approved": (*_ROUND, *_AWARD, "by"),
    "award_rejected": (*_ROUND, *_MOVED, "reason"),
    "award_unkeyed": (*_ROUND, *_MOVED, "reason"),
    "award_reversed": (*_ROUND, *_MOVED, "reason"),
    "hand_keyed": (*_ROUND, "hand", "source", "cents"),
    "hand_unkeyed": (*_ROUND, "hand", "source", "cents"),
    "envy": (*_ROUND, "hand", "from_seat", "cents"),
    "tray_paid": (*_ROUND, "hand", "cents"),
    "round_reconciled": (*_ROUND, "settlement"),
    "round_voided": (*_ROUND, "by"),
    "table_closed": (*_ROUND, "reason"),
    "table_opened": (*_ROUND, "reason"),
    "late_bet": (*_ROUND, "present"),
    "daemon_started": ("version", "config_digest", "head_seq"),
    "self_check": (
        "ok",
        "problems",
        "software_sha256",
        "software_crc16",
        "software_files",
        "dependencies",
    ),
    "board_online": ("board_id", "protocol_version"),
    "board_offline": ("reason",),
    "command_rejected": ("command", "reason", "code"),
    "key_refused": ("code", "reason"),
    "operator_close": ("operator", "reason", "uid", "pid"),
    "operator_open": ("operator", "reason", "uid", "pid"),
    "control_refused": ("uid", "pid", "reason"),
    "parameter_changed": ("changes", "operator", "approver", "reason", "config_digest", "uid"),
}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def meter_problem(data: Mapping[str, Any], table_id: str, meter_id: str) -> str:
    """Why a sign must not show this meter message ("" when it may)."""
    if not _is_int(data.get("cents")) or not _is_int(data.get("seq")):
        return "a meter needs integer cents and seq"
    if data.get("state") not in METER_STATES:
        return f"unknown meter state {data.get('state')!r}"
    display = data.get("display")
    if not isinstance(display, str) or not _DISPLAY.fullmatch(display):
        return f"display {display!r} is not dollars and cents"
    if data.get("table") != table_id or data.get("meter") != meter_id:
        return "its table or meter is not the topic's"
    return ""


def event_problem(data: Mapping[str, Any], table_id: str) -> str:
    """Why a sign must ignore this event ("" when it may act on it; an unknown kind is fine
    here and is then ignored by the sign)."""
    if not _is_int(data.get("seq")):
        return "an event needs an integer seq"
    if data.get("table") != table_id:
        return "its table is not the topic's"
    missing = [k for k in EVENT_KEYS.get(str(data.get("kind")), ()) if k not in data]
    if missing:
        return f"a {data.get('kind')} event without {', '.join(missing)}"
    return ""


def meter_units(state: TableState, meter_id: str) -> int:
    return state.balance(accounts.meter(meter_id))
