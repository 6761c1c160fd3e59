"""Operator actions over the control socket: status, close/open, parameters, corrections.

Every action that changes state needs an operator id and a reason; parameter changes and
meter corrections also a second person's approval. Each is journaled (who, why, values
before and after), and so is every refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog

from progressived.config import ConfigError
from progressived.control import Peer
from progressived.engine import AdjustMeter, Command, SetClosed, TransferMeter, accounts
from progressived.keypad import KeypadInterpreter
from progressived.ledger import LedgerError
from progressived.money import MoneyError, cents, display, dollars
from progressived.mqtt.payloads import meter_state
from progressived.params import TableParams
from progressived.settings import load_daemon_config

if TYPE_CHECKING:
    from progressived.service import Controller

log = structlog.get_logger("progressived.operator")

OPERATOR_CLOSED = "operator"


class OperatorDesk:
    """Answers control-socket requests for one controller."""

    def __init__(self, controller: Controller) -> None:
        self.c = controller

    def status(self) -> dict[str, Any]:
        c = self.c
        state = c.state
        ok, why = c.check_health()
        return {
            "table": c.params.table_id,
            "paytable": c.params.paytable.id,
            "version": c.version,
            "round": state.round,
            "phase": state.phase.value,
            "locked_seats": sorted(state.locked),
            "pending_awards": [
                {"seat": a.seat, "hand": a.hand, "cents": cents(a.units)} for a in state.pending
            ],
            "closed": sorted(state.closed),
            "meters": {
                m: {
                    "display": display(state.balance(accounts.meter(m))),
                    "cents": cents(state.balance(accounts.meter(m))),
                    "reserve_cents": cents(state.balance(accounts.reserve(m))),
                    "overflow_cents": cents(state.balance(accounts.overflow(m))),
                    "state": meter_state(state, m, c.health.board_online),
                }
                for m in c.params.meter_ids
            },
            "board": {"online": c.health.board_online, "counters": dict(c.driver.counters)},
            "broker": {"connected": c.health.broker_connected},
            "ledger": {
                "ok": c.health.ledger_ok,
                "head_seq": c.ledger.head_seq,
                "path": str(c.config.ledger.path),
                "error": c.health.last_error if not c.health.ledger_ok else "",
            },
            "healthy": ok,
            "health": why,
            "metrics_port": c.metrics_port,
        }

    async def refused(self, peer: Peer, why: str) -> None:
        await self.c.record("control_refused", {"uid": peer.uid, "pid": peer.pid, "reason": why})

    async def handle(self, request: Mapping[str, Any], peer: Peer) -> dict[str, Any]:
        """One control-socket request (see progressived.control)."""
        c = self.c
        action = str(request.get("action", ""))
        if action == "status":
            return {"ok": True, "status": self.status()}
        operator = str(request.get("operator", "")).strip()
        reason = str(request.get("reason", "")).strip()
        approver = str(request.get("approver", "")).strip()
        if not operator or not reason:
            return {"ok": False, "error": "an operator id and a reason are required"}
        now = c.clock()
        if action in ("close", "open"):
            who = {"operator": operator, "reason": reason, "uid": peer.uid, "pid": peer.pid}
            if not await c.record(f"operator_{action}", who, actor=operator):
                return {"ok": False, "error": "the ledger is unavailable"}
            closing = action == "close"
            await c.apply(SetClosed(reason=OPERATOR_CLOSED, closed=closing, at=now, actor=operator))
            return {"ok": True, "closed": sorted(c.state.closed)}
        if action == "reload":
            return await self.reload_parameters(operator, approver, reason, peer)
        if action in ("adjust", "transfer"):
            try:
                units = dollars(str(request.get("amount", "")))
            except MoneyError as exc:
                return {"ok": False, "error": str(exc)}
            command: Command
            if action == "adjust":
                command = AdjustMeter(
                    meter=str(request.get("meter", "main")),
                    units=units,
                    reason=reason,
                    approved_by=approver,
                    actor=operator,
                    at=now,
                )
            else:
                command = TransferMeter(
                    from_meter=str(request.get("from", "")),
                    to_meter=str(request.get("to", "")),
                    units=units,
                    reason=reason,
                    approved_by=approver,
                    actor=operator,
                    at=now,
                )
            why_not = await c.submit(command)
            if why_not is not None:
                return {"ok": False, "error": why_not}
            return {"ok": True, "status": self.status()}
        return {"ok": False, "error": f"unknown action {action!r}"}

    async def reload_parameters(
        self, operator: str, approver: str, reason: str, peer: Peer
    ) -> dict[str, Any]:
        """Re-read the configuration file and apply new progressive parameters.

        Refused while a round is open or an award awaits the supervisor, without a second
        person's approval, or when the new file is invalid, names another table, changes the
        set of meters, or sets a limit below a meter's current amount. Journaled with the
        old and new values. Board, MQTT and ledger settings take effect at the next start.
        """
        c = self.c
        if not approver or approver == operator:
            return {"ok": False, "error": "a second person must approve (two-person control)"}
        async with c.lock:
            if c.state.phase.value != "open" or c.state.pending:
                return {
                    "ok": False,
                    "error": "refused while a round is open: reconcile or void it first",
                }
            try:
                new = load_daemon_config(c.config.source)
            except ConfigError as exc:
                return {"ok": False, "error": str(exc)}
            old, params = c.params, new.params
            if params.table_id != old.table_id:
                return {"ok": False, "error": "the table id cannot change"}
            if params.meter_ids != old.meter_ids:
                return {"ok": False, "error": "the set of meters cannot change while running"}
            for meter in params.meters:
                current = c.state.balance(accounts.meter(meter.id))
                if meter.limit is not None and meter.limit < current:
                    return {
                        "ok": False,
                        "error": f"meter {meter.id}: a limit must be at least the current amount",
                    }
            changes = param_changes(old, params)
            if not changes:
                return {"ok": True, "changes": {}}
            detail = {
                "changes": changes,
                "operator": operator,
                "approver": approver,
                "reason": reason,
                "config_digest": new.digest,
                "uid": peer.uid,
            }
            try:
                await c.commit(
                    c.ledger.record,
                    "parameter_changed",
                    detail,
                    at=c.clock(),
                    actor=operator,
                    round=c.state.round,
                    outbox=c.system_outbox("parameter_changed", detail),
                )
            except LedgerError as exc:
                return {"ok": False, "error": f"not journaled: {exc}"}
            c.params, c.config = params, new
            c.keypad = KeypadInterpreter(new.keypad, params.paytable.hand_ids, params.seats)
            log.info("parameters changed", changes=changes, operator=operator, approver=approver)
        c.after_change()
        return {"ok": True, "changes": changes}


def param_changes(old: TableParams, new: TableParams) -> dict[str, Any]:
    """Old and new values of every progressive parameter that differs (JSON-ready)."""

    def describe(p: TableParams) -> dict[str, Any]:
        out: dict[str, Any] = {
            "paytable": p.paytable.id,
            "wager_units": p.wager_units,
            "policy": p.policy.value,
            "award_order": p.award_order.value,
            "seats": p.seats,
        }
        for m in p.meters:
            out[f"meters.{m.id}.seed_units"] = p.reset_seed(m.id)
            out[f"meters.{m.id}.rate"] = str(m.rate)
            out[f"meters.{m.id}.reserve_rate"] = str(m.reserve_rate)
            out[f"meters.{m.id}.limit_units"] = m.limit
            out[f"meters.{m.id}.above_limit"] = m.above_limit.value
        return out

    before, after = describe(old), describe(new)
    return {k: {"old": before[k], "new": after[k]} for k in after if before.get(k) != after[k]}
