"""The operator desk's slip actions over the daemon's port (in process): void and reissue,
reprint and print through the daemon's printer queue, refusals in one line."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from pathlib import Path

from progressived.cli.control_cmd import render_answer
from progressived.config.slips import slip_rules
from progressived.daemon.desk import DaemonDesk
from progressived.daemon.operator import OperatorDesk
from progressived.daemon.service import Controller
from progressived.daemon.slip_printer import SlipPrinting
from progressived.engine import Command, decide
from progressived.ledger import Ledger
from progressived.ledger.slip_reads import slips
from progressived.ledger.slips import SlipIssuer
from progressived.printing.network import NetworkPrinter
from progressived.runtime.clock import utc_now
from progressived.runtime.control import Peer
from progressived.testing.broker import Mosquitto
from progressived.testing.receipt_printer import TestPrinter
from progressived.testing.waits import until
from tests.test_crash_only import boardless
from tests.test_slips import hit_round

PEER = Peer(uid=0, gid=0, pid=1)


def played(path: Path, controller: Controller) -> None:
    """A round with a jackpot, tray pay and envy journaled (with its slips) before start."""
    config = controller.config
    params = config.params
    with Ledger.open(path, params, at=utc_now()) as ledger:
        ledger.issue_slips(SlipIssuer(slip_rules(config.slips, params.table_id), lambda: params))
        state = ledger.state
        for command in hit_round(params):
            stamped: Command = replace(command, at=utc_now())
            decision = decide(params, state, stamped)
            assert decision.accepted, decision
            state = decision.state
            ledger.append(decision.events, state, at=stamped.at, actor=stamped.actor)


async def test_void_reprint_and_print_through_the_desk(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    config, controller = boardless(tmp_path, mosquitto)
    played(config.ledger.path, controller)
    await controller.start()
    with TestPrinter() as printer:
        device = NetworkPrinter("127.0.0.1", printer.port, timeout_s=2.0)
        printing = SlipPrinting(controller.journal, device, retry_s=0.05, poll_s=0.05)
        port = DaemonDesk(
            controller.journal,
            controller.board_input,
            controller.driver,
            controller.health,
            version="test",
            metrics_port=lambda: None,
            printing=printing,
        )
        desk = OperatorDesk(port)
        ask = {"operator": "sup-2", "reason": "torn in the printer"}
        answer = await desk.handle(
            {"action": "slip-void", "serial": "it-1-000001", "reissue": True, **ask}, PEER
        )
        assert answer == {"ok": True, "voided": "it-1-000001", "reissued_as": "it-1-000007"}
        again = await desk.handle({"action": "slip-void", "serial": "it-1-000001", **ask}, PEER)
        assert again == {"ok": False, "error": "slip it-1-000001 is already void"}
        unknown = await desk.handle({"action": "slip-reprint", "serial": "nope-1", **ask}, PEER)
        assert unknown == {"ok": False, "error": "no slip nope-1 in this ledger"}
        bare = await desk.handle({"action": "slip-void", "serial": "it-1-000002"}, PEER)
        assert bare["ok"] is False and "reason" in bare["error"]
        odd = {"operator": "sup|2", "reason": "x"}  # an id the ledger cannot hash apart
        for action in ("slip-reprint", "slip-void"):
            refused = await desk.handle({"action": action, "serial": "it-1-000002", **odd}, PEER)
            assert refused["ok"] is False and "actor" in refused["error"], refused
        reprint = await desk.handle(
            {"action": "slip-reprint", "serial": "it-1-000002", **ask}, PEER
        )
        assert reprint == {"ok": True, "serial": "it-1-000002", "reprint": 1}
        waiting = await desk.handle({"action": "slip-print", "serial": "it-1-000002"}, PEER)
        assert waiting == {"ok": True, "serial": "it-1-000002", "waiting": ["REPRINT 1"]}
        status = desk.status()["slips"]
        assert status["printer"] == f"127.0.0.1:{printer.port}" and status["state"] == "ready"
        task = asyncio.create_task(printing.run())
        try:
            await until(lambda: len(printer.receipts()) == 1, "the reprint printed")
            await until(lambda: printing.status().unprinted == 0, "and journaled")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        shown = render_answer("status", {"status": desk.status()})
        assert f"slips: 0 unprinted; printer 127.0.0.1:{printer.port} ready" in shown
        (receipt,) = printer.receipts()
        assert "REPRINT 1" in [line.strip() for line in receipt.lines]
        nothing = await desk.handle({"action": "slip-print", "serial": "it-1-000002"}, PEER)
        assert nothing["ok"] is False and "no copy waiting" in nothing["error"]
    await controller.db(controller.ledger.close)
    controller.executor.close()
    found = {s.slip.serial: s for s in slips(config.ledger.path)}
    assert (
        found["it-1-000001"].void is not None
        and found["it-1-000007"].slip.reissue_of == "it-1-000001"
    )


async def test_a_table_without_a_printer_refuses_print_and_reprint(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    config, controller = boardless(tmp_path, mosquitto)
    played(config.ledger.path, controller)
    await controller.start()
    desk = OperatorDesk(
        DaemonDesk(
            controller.journal,
            controller.board_input,
            controller.driver,
            controller.health,
            version="test",
            metrics_port=lambda: None,
        )
    )
    try:
        for action in ("slip-print", "slip-reprint"):
            answer = await desk.handle(
                {"action": action, "serial": "it-1-000001", "operator": "a", "reason": "b"}, PEER
            )
            assert answer == {
                "ok": False,
                "error": "this table has no slip printer ([slips.printer])",
            }
        assert "slips" not in desk.status()
    finally:
        await controller.db(controller.ledger.close)
        controller.executor.close()
