"""``progressivectl status|close|open|params-reload|meter-adjust|meter-transfer``.

Operator actions through the daemon's control socket. Actions that change state need an
operator id and a reason; parameter changes and meter corrections a second person's approval.
Each prints text for a person by default and the daemon's JSON answer with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from progressived.core.money import UNITS_PER_CENT, display
from progressived.daemon.refusal_advice import advice
from progressived.runtime.control import request

DEFAULT_SOCKET = Path("/run/progressived/control.sock")


def _common(p: argparse.ArgumentParser, *, change: bool, approval: bool = False) -> None:
    p.add_argument(
        "--socket", type=Path, default=DEFAULT_SOCKET, help="the daemon's control socket"
    )
    p.add_argument(
        "--json", action="store_true", help="print the daemon's JSON answer (default: text)"
    )
    if change:
        p.add_argument("--operator", required=True, help="your operator id (journaled)")
        p.add_argument("--reason", required=True, help="why (journaled)")
    if approval:
        p.add_argument("--approver", required=True, help="the second person's id (journaled)")


def register(sub: Any) -> None:
    p = sub.add_parser("status", help="table, round, meters, board / broker / ledger health")
    _common(p, change=False)
    p.set_defaults(handler=run, action="status")
    for action, text in (("close", "close the progressive"), ("open", "reopen the progressive")):
        p = sub.add_parser(action, help=text)
        _common(p, change=True)
        p.set_defaults(handler=run, action=action)
    p = sub.add_parser(
        "params-reload", help="apply the configuration file's progressive parameters"
    )
    _common(p, change=True, approval=True)
    p.set_defaults(handler=run, action="reload")
    p = sub.add_parser("meter-adjust", help="a documented meter correction (signed amount)")
    p.add_argument("meter")
    p.add_argument("amount", help="dollars, e.g. -25.00")
    _common(p, change=True, approval=True)
    p.set_defaults(handler=run, action="adjust")
    p = sub.add_parser(
        "meter-transfer", help="move the amount above the reset value to another meter"
    )
    p.add_argument("from_meter")
    p.add_argument("to_meter")
    p.add_argument("amount", help="dollars")
    _common(p, change=True, approval=True)
    p.set_defaults(handler=run, action="transfer")


def _render_link_role(status: dict[str, Any]) -> list[str]:
    """Active or standby since when, and the lease as this controller last saw it."""
    role = status.get("role")
    if role is None:
        return []
    line = f"role: {role.upper()} since {status['role_since']}"
    lease = status.get("lease")
    if lease is not None:
        holder = lease["holder"] or "nobody"
        expiry = lease["expires_at"] or "unknown"
        line += (
            f"; lease held by {holder} (token {lease['token']}, expires {expiry}, "
            f"term {lease['lease_s']} s; this controller is {lease['me']})"
        )
    lines = [line]
    brokers = status.get("brokers", [])
    if len(brokers) > 1:  # one line each; with one, the "broker:" line says it all
        lines += [f"  broker {b['broker']}: {_broker_line(b)}" for b in brokers]
    return lines


def _render_link_status(status: dict[str, Any]) -> str:
    lines = [f"link {status['link']}  policy {status['policy']}  version {status['version']}"]
    lines += _render_link_role(status)
    for meter_id, m in status["meters"].items():
        lines.append(
            f"meter {meter_id}: {m['display']} (epoch {m['epoch']}), reserve "
            f"{display(m['reserve_cents'] * UNITS_PER_CENT)}, pending "
            f"{display(m['pending_cents'] * UNITS_PER_CENT)}"
        )
    for table, t in status["tables"].items():
        heard = "never" if t["heard_s_ago"] is None else f"{t['heard_s_ago']} s ago"
        lines.append(f"table {table}: high-water {t['hwm']}, heard {heard}")
    counts = ", ".join(f"{k} {v}" for k, v in status["messages"].items())
    lines.append(f"messages: {counts} (batches {status['batches']})")
    lines.append(f"broker: {_broker_line(status['broker'])}")
    ledger = status["ledger"]
    health = "ok" if ledger["ok"] else "UNAVAILABLE " + ledger["error"]
    head = "none read: a standby" if ledger["head_seq"] is None else ledger["head_seq"]
    lines.append(f"ledger: {health} (head {head})")
    return "\n".join(lines)


def _render_status(status: dict[str, Any]) -> str:
    if isinstance(status.get("link"), str):  # the link controller's own status
        return _render_link_status(status)
    lines = [
        f"table {status['table']}  paytable {status['paytable']}  version {status['version']}",
        f"round {status['round']} ({status['phase']})"
        + (f", locked seats {status['locked_seats']}" if status["locked_seats"] else ""),
    ]
    for award in status["pending_awards"]:
        lines.append(
            f"  awaiting supervisor: seat {award['seat']} {award['hand']} "
            f"{display(award['cents'] * UNITS_PER_CENT)}"
        )
    lines += _render_meters(status)
    closed = ", ".join(status["closed"]) or "no"
    lines.append(f"closed: {closed}")
    lines.append(f"board: {'online' if status['board']['online'] else 'OFFLINE'}")
    lines.append(f"broker: {_broker_line(status['broker'])}")
    ledger = status["ledger"]
    health = "ok" if ledger["ok"] else "UNAVAILABLE " + ledger["error"]
    lines.append(f"ledger: {health} (head {ledger['head_seq']})")
    lines.append(f"health: {status['health']}")
    if "slips" in status:  # a table with a slip printer (docs/slips.md)
        lines.append(_slips_line(status["slips"]))
    if "link" in status:  # a table that joined a link
        lines += _render_table_link(status["link"])
    if "archive" in status:  # a table with an [archive] section
        lines.append(_render_table_archive(status["archive"]))
    return "\n".join(lines)


def _render_table_archive(archive: dict[str, Any]) -> str:
    """How far behind the archive is, and whether it refuses the table's rows."""
    if not archive["heard"]:
        return (
            f"archive: NOT HEARD yet; {archive['lag_rows']} rows only on this board "
            f"(oldest {archive['lag_seconds']:.0f} s)"
        )
    line = (
        f"archive {archive['archive']}: archived to row {archive['archived_seq']} of "
        f"{archive['head_seq']}; {archive['lag_rows']} rows behind "
        f"({archive['lag_seconds']:.0f} s)"
    )
    if archive["refused"] is not None:
        refused = archive["refused"]
        line += f"; REFUSED ({refused['code']}: {refused['reason']})"
    return line


def _slips_line(slips: dict[str, Any]) -> str:
    """``slips: 2 unprinted; printer 10.0.0.9:9100 out-of-paper since ... (why)``."""
    state = slips["state"]
    line = f"slips: {slips['unprinted']} unprinted; printer {slips['printer']} {state}"
    if state != "ready":
        line += f" since {slips['since']} ({slips['error']})"
    return line


def _broker_line(broker: dict[str, Any]) -> str:
    """``connected``, or ``DISCONNECTED`` and why (``not authorised: ...``, the socket's
    error); then the topics on which the broker refuses the table's publishes."""
    if broker["connected"]:
        line = "connected"
    else:
        state, error = broker.get("state", ""), broker.get("error", "")
        parts = [state] if state not in ("", "unreachable", error) else []
        why = ": ".join([*parts, error] if error else parts)
        line = f"DISCONNECTED ({why})" if why else "DISCONNECTED"
    for topic, reason in broker.get("denied", {}).items():
        line += f"; REFUSES publishing on {topic} ({reason})"
    return line


def _render_table_link(link: dict[str, Any]) -> list[str]:
    """A linked table's link: up or down and since when, the outbox, the linked meters."""
    heard = link["heartbeat_age_s"]
    beat = "no heartbeat yet" if heard is None else f"last heartbeat {heard:.1f} s ago"
    broker = "connected" if link["broker_connected"] else "DISCONNECTED"
    lines = [
        f"link {link['id']}: {'up' if link['up'] else 'DOWN'} since {link['since']} "
        f"({beat}), broker {broker}"
    ]
    outbox = link["outbox"]
    oldest = "" if outbox["oldest_s"] is None else f", oldest {outbox['oldest_s']:.1f} s"
    lines.append(
        f"  outbox: {outbox['depth']} awaiting the link's answer{oldest}; resends {link['resends']}"
    )
    for meter_id, m in link["meters"].items():
        value = "not heard yet" if m["display"] is None else m["display"]
        named = m.get("link_meter", meter_id)
        at_link = "" if named == meter_id else f" (the link's meter {named})"
        lines.append(
            f"  linked meter {meter_id}{at_link}: {value} (epoch {m['epoch']}, lseq {m['lseq']})"
        )
    refused = link.get("refused")
    if refused:
        words = f": {refused['reason']}" if refused["reason"] else ""
        lines.append(
            f"  the linked progressive is CLOSED at this table: the link refused it "
            f"({refused['code']}{words}); {advice(refused['code'])}"
        )
    elif link["closed"]:
        lines.append("  the linked progressive is CLOSED at this table (link-down)")
    return lines


def _render_meters(status: dict[str, Any]) -> list[str]:
    return [
        f"meter {meter_id}: {meter['display']} ({meter['state']}), reserve "
        f"{display(meter['reserve_cents'] * UNITS_PER_CENT)}"
        for meter_id, meter in status["meters"].items()
    ]


def render_answer(action: str, answer: dict[str, Any]) -> str:
    """The daemon's answer to an action, as text for a person (``--json`` gives it raw)."""
    if action == "status":
        return _render_status(answer["status"])
    if action in ("close", "open"):
        closed = answer.get("closed", [])
        done = "closed" if action == "close" else "reopened by the operator"
        still = f"; closed for: {', '.join(closed)}" if closed else "; the progressive is open"
        return f"progressive {done}{still}"
    if action == "reload":
        changes = answer.get("changes", {})
        if not changes:
            return "no progressive parameter differs from the running ones: nothing changed"
        return "parameters changed (journaled):\n" + "\n".join(
            f"  {key}: {change['old']} -> {'(removed)' if change.get('removed') else change['new']}"
            for key, change in changes.items()
        )
    lines = ["done (journaled)"]
    if "status" in answer:
        lines += _render_meters(answer["status"])
    return "\n".join(lines)


def ask_daemon(socket: Path, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The daemon's answer to ``payload`` on its control socket, or ``None`` after one line
    on standard error saying why it could not be asked (the caller exits 2)."""
    try:
        return request(socket, payload)
    except PermissionError:
        print(
            f"progressivectl: permission denied on {socket} (are you in its group?)",
            file=sys.stderr,
        )
    except (OSError, ValueError) as exc:
        print(f"progressivectl: cannot reach the daemon at {socket}: {exc}", file=sys.stderr)
    return None


def run(args: argparse.Namespace) -> int:
    payload: dict[str, Any] = {"action": args.action}
    for key in ("operator", "reason", "approver", "meter", "amount"):
        if getattr(args, key, None) is not None:
            payload[key] = getattr(args, key)
    if args.action == "transfer":
        payload["from"], payload["to"] = args.from_meter, args.to_meter
    if (answer := ask_daemon(args.socket, payload)) is None:
        return 2
    if args.json:
        print(json.dumps(answer, indent=2, sort_keys=True))
    elif answer.get("ok"):
        print(render_answer(args.action, answer))
    if not answer.get("ok"):
        print(f"progressivectl: refused: {answer.get('error')}", file=sys.stderr)
        return 1
    return 0
