"""Operator actions over the control socket: status, close/open, parameters, corrections,
voiding a payout slip.

Every action that changes state needs an operator id and a reason; parameter changes and
meter corrections also a second person's approval. Each is journaled (who, why, values
before and after), and so is every refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from progressived.config.daemon import DaemonConfig, load_daemon_config
from progressived.config.table import ConfigError
from progressived.core.money import MoneyError, cents, display, dollars
from progressived.core.params import TableParams
from progressived.daemon.port import (
    CommandRefused,
    DeskPort,
    DeskStatus,
    LinkStatus,
    Note,
    ParameterPlan,
    RefusalCode,
)
from progressived.engine import AdjustMeter, Command, SetClosed, TableState, TransferMeter, accounts
from progressived.engine.state import LINK_REFUSED, Phase
from progressived.ledger import conversion, parameters
from progressived.mqtt.payloads import meter_state
from progressived.runtime.control import Peer

OPERATOR_CLOSED = "operator"
LEDGER_UNAVAILABLE = "the ledger is unavailable"


@dataclass(frozen=True, slots=True)
class _Who:
    """Who asks for an operator action, and when (every action but status names both)."""

    operator: str
    reason: str
    approver: str
    peer: Peer
    now: str


class OperatorDesk:
    """Answers control-socket requests for one table, through the daemon's :class:`DeskPort`."""

    def __init__(self, port: DeskPort) -> None:
        self.port = port

    def status(self) -> dict[str, Any]:
        s = self.port.status()
        state = s.state
        out: dict[str, Any] = {
            "table": s.table_id,
            "paytable": s.paytable_id,
            "version": s.version,
            "round": state.round,
            "phase": state.phase.value,
            "locked_seats": sorted(state.locked),
            "pending_awards": [
                {"seat": a.seat, "hand": a.hand, "cents": cents(a.units)} for a in state.pending
            ],
            "closed": sorted(state.closed),
            "meters": {m: self._meter(s, m) for m in s.meter_ids},
            "board": {"online": s.board_online, "counters": dict(s.board_counters)},
            "broker": {
                "connected": s.broker_connected,
                "state": s.broker_state,
                "error": s.broker_error,
                "denied": dict(sorted(s.broker_denied.items())),
                "denied_total": s.broker_denied_total,
            },
            "ledger": {
                "ok": s.ledger_ok,
                "head_seq": s.head_seq,
                "path": str(s.ledger_path),
                "error": s.ledger_error if not s.ledger_ok else "",
            },
            "healthy": s.healthy,
            "health": s.health,
            "metrics_port": s.metrics_port,
        }
        if s.link is not None:  # a table that joined a link; a single table has no key
            out["link"] = link_status(s.link)
        if s.archive is not None:  # a table with an [archive] section
            out["archive"] = dict(s.archive)
        if s.slips is not None:  # a table with a slip printer (docs/slips.md)
            out["slips"] = dict(s.slips)
        return out

    @staticmethod
    def _meter(s: DeskStatus, meter_id: str) -> dict[str, Any]:
        """A meter as the signs show it: a linked meter with the link's value (the table
        holds none of its money), closed until the table has heard it; ``link-down`` and a
        link refusal close linked meters only, not local ones."""
        state = s.state
        units = state.balance(accounts.meter(meter_id))
        linked = None
        if s.link is not None:
            linked = next((m for m in s.link.meters if m.meter == meter_id), None)
        if linked is not None:
            units = linked.units or 0
        heard = linked is None or linked.units is not None
        out = {
            "display": display(units),
            "cents": cents(units),
            "reserve_cents": cents(state.balance(accounts.reserve(meter_id))),
            "overflow_cents": cents(state.balance(accounts.overflow(meter_id))),
            "state": meter_state(state, meter_id, s.board_online, linked is not None, heard),
        }
        if linked is not None and s.link is not None:
            out["link"] = s.link.link_id
        return out

    async def refused(self, peer: Peer, why: str) -> None:
        await self.port.record(
            "control_refused", {"uid": peer.uid, "pid": peer.pid, "reason": why}, actor="system"
        )

    async def handle(self, request: Mapping[str, Any], peer: Peer) -> dict[str, Any]:
        """One control-socket request (see progressived.runtime.control)."""
        action = str(request.get("action", ""))
        if action == "status":
            return {"ok": True, "status": self.status()}
        if action == "slip-print":  # wake the slip printer's queue: nothing is journaled
            return await self._slip_print(str(request.get("serial", "")))
        who = _Who(
            operator=str(request.get("operator", "")).strip(),
            reason=str(request.get("reason", "")).strip(),
            approver=str(request.get("approver", "")).strip(),
            peer=peer,
            now=self.port.now(),
        )
        if not who.operator or not who.reason:
            return {"ok": False, "error": "an operator id and a reason are required"}
        actions = {
            "close": self._close_or_open,
            "open": self._close_or_open,
            "reload": self._reload,
            "slip-void": self._slip_void,
            "slip-reprint": self._slip_reprint,
            "adjust": self._adjust_or_transfer,
            "transfer": self._adjust_or_transfer,
        }
        if (act := actions.get(action)) is None:
            return {"ok": False, "error": f"unknown action {action!r}"}
        return await act(action, request, who)

    async def _slip_print(self, serial: str) -> dict[str, Any]:
        waiting = await self.port.print_now(serial)
        if isinstance(waiting, str):
            return {"ok": False, "error": waiting}
        return {"ok": True, "serial": serial, "waiting": waiting}

    async def _close_or_open(
        self, action: str, request: Mapping[str, Any], who: _Who
    ) -> dict[str, Any]:
        # The operator's action and its effect are journaled in one transaction.
        noted = {"operator": who.operator, "reason": who.reason, "uid": who.peer.uid,
                 "pid": who.peer.pid}  # fmt: skip
        closing, now, operator = action == "close", who.now, who.operator
        done = await self.port.submit(
            SetClosed(reason=OPERATOR_CLOSED, closed=closing, at=now, actor=operator),
            note=Note(f"operator_{action}", noted, operator),
        )
        # Refused otherwise (already closed so, say): the answer shows the closures.
        if isinstance(done, CommandRefused) and done.code is RefusalCode.LEDGER_UNAVAILABLE:
            return {"ok": False, "error": LEDGER_UNAVAILABLE}
        if not closing:  # the configuration fixed: the link refusal's closure ends too
            for reason in sorted(self.port.status().state.closed):
                if reason.startswith(LINK_REFUSED):
                    reopen = SetClosed(reason=reason, closed=False, at=now, actor=operator)
                    if isinstance(done := await self.port.submit(reopen), CommandRefused):
                        return {"ok": False, "error": done.reason}
        return {"ok": True, "closed": sorted(self.port.status().state.closed)}

    async def _reload(self, action: str, request: Mapping[str, Any], who: _Who) -> dict[str, Any]:
        return await self.reload_parameters(who.operator, who.approver, who.reason, who.peer)

    async def _slip_void(
        self, action: str, request: Mapping[str, Any], who: _Who
    ) -> dict[str, Any]:
        serial, reissue = str(request.get("serial", "")), request.get("reissue") is True
        void = await self.port.void_slip(serial, reason=who.reason, by=who.operator,
                                         reissue=reissue)  # fmt: skip
        if isinstance(void, str):
            return {"ok": False, "error": void}
        return {"ok": True, "voided": void.serial, "reissued_as": void.reissued_as}

    async def _slip_reprint(
        self, action: str, request: Mapping[str, Any], who: _Who
    ) -> dict[str, Any]:
        serial = str(request.get("serial", ""))
        n = await self.port.reprint_slip(serial, reason=who.reason, by=who.operator)
        if isinstance(n, str):
            return {"ok": False, "error": n}
        return {"ok": True, "serial": serial, "reprint": n}

    async def _adjust_or_transfer(
        self, action: str, request: Mapping[str, Any], who: _Who
    ) -> dict[str, Any]:
        try:
            units = dollars(str(request.get("amount", "")))
        except MoneyError as exc:
            return {"ok": False, "error": str(exc)}
        command: Command
        if action == "adjust":
            command = AdjustMeter(
                meter=str(request.get("meter", "main")),
                units=units,
                reason=who.reason,
                approved_by=who.approver,
                actor=who.operator,
                at=who.now,
            )
        else:
            command = TransferMeter(
                from_meter=str(request.get("from", "")),
                to_meter=str(request.get("to", "")),
                units=units,
                reason=who.reason,
                approved_by=who.approver,
                actor=who.operator,
                at=who.now,
            )
        if isinstance(done := await self.port.submit(command), CommandRefused):
            return {"ok": False, "error": done.reason}
        return {"ok": True, "status": self.status()}

    async def reload_parameters(
        self, operator: str, approver: str, reason: str, peer: Peer
    ) -> dict[str, Any]:
        """Re-read the configuration file and apply new progressive parameters.

        Refused while a round is open or an award awaits the supervisor, without a second
        person's approval, or when the new file is invalid, names another table, links or
        drops a local meter that holds money (:mod:`progressived.ledger.conversion`), changes
        the set of meters or a meter's link, or sets a limit below a meter's current amount.
        Journaled with the old and new values. Board, MQTT and ledger settings take effect
        at the next start.
        """
        if not approver or approver == operator:
            return {"ok": False, "error": "a second person must approve (two-person control)"}
        who = {"operator": operator, "approver": approver, "reason": reason, "uid": peer.uid}

        def check(state: TableState, current: DaemonConfig) -> ParameterPlan | str:
            return plan_reload(state, current, who)

        plan = await self.port.change_parameters(check)
        if isinstance(plan, str):
            return {"ok": False, "error": plan}
        return {"ok": True, "changes": dict(plan.changes)}


def link_status(link: LinkStatus) -> dict[str, Any]:
    """A linked table's link for ``status`` (JSON-ready; docs/link.md, "Table side")."""
    return {
        "id": link.link_id,
        "up": link.up,
        "since": link.since,
        "heartbeat_age_s": round(link.heartbeat_age_s, 3) if link.heard else None,
        "broker_connected": link.broker_connected,
        "closed": link.closed,
        "refused": (
            None if link.refused is None else {"code": link.refused, "reason": link.refused_reason}
        ),
        "outbox": {
            "depth": link.outbox_depth,
            "oldest_s": None if link.outbox_oldest_s is None else round(link.outbox_oldest_s, 3),
        },
        "resends": link.resends,
        "meters": {
            m.meter: {
                "cents": None if m.units is None else cents(m.units),
                "display": None if m.units is None else display(m.units),
                "epoch": m.epoch,
                "lseq": m.lseq,
                "link_meter": m.link_meter or m.meter,
            }
            for m in link.meters
        },
    }


def plan_reload(
    state: TableState, current: DaemonConfig, who: Mapping[str, Any]
) -> ParameterPlan | str:
    """The configuration file re-read and checked against the running table, or why not."""
    if state.phase is not Phase.OPEN or state.pending:
        return "refused while a round is open: reconcile or void it first"
    try:
        new = load_daemon_config(current.source)
    except ConfigError as exc:
        return str(exc)
    old, params = current.params, new.params
    if params.table_id != old.table_id:
        return "the table id cannot change"
    # A local meter with money that the new file links or drops: said now, in the words a
    # restart would meet (it refuses to start on them), not "restart the daemon".
    if found := conversion.held(state, parameters.describe(old), params):
        return conversion.refusal(found)
    if params.meter_ids != old.meter_ids:
        return "the set of meters cannot change while running"
    if params.link_meter_ids() != old.link_meter_ids() or params.link_id != old.link_id:
        return "a meter's link or link_meter cannot change while running: restart the daemon"
    for meter in params.meters:
        balance = state.balance(accounts.meter(meter.id))
        if meter.limit is not None and meter.limit < balance:
            return f"meter {meter.id}: a limit must be at least the current amount"
    changes = param_changes(old, params)
    detail = {
        "changes": changes,
        "operator": who["operator"],
        "approver": who["approver"],
        "reason": who["reason"],
        "config_digest": new.digest,
        "uid": who["uid"],
    }
    return ParameterPlan(new, changes, detail, str(who["operator"]))


def param_changes(old: TableParams, new: TableParams) -> dict[str, Any]:
    """Old and new values of every progressive parameter that differs (JSON-ready): the same
    description the ledger records at creation and when opened with other parameters, so a
    meter added by a reload shows ``old: null`` instead of failing."""
    return parameters.changes(parameters.describe(old), parameters.describe(new))
