"""The operator desk's close/open is one transaction (that it reaches the daemon only
through its port is pyproject.toml's import-linter contract ``desk-port``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from progressived.daemon.desk import DaemonDesk
from progressived.daemon.operator import OperatorDesk
from progressived.ledger import store
from progressived.runtime.control import Peer
from progressived.testing.broker import Mosquitto
from tests.test_crash_only import boardless


async def test_operator_close_and_open_are_each_one_ledger_transaction(
    tmp_path: Path, mosquitto: Mosquitto, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, controller = boardless(tmp_path, mosquitto)
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
    commits = 0
    real_commit = store.commit

    def counting_commit(*args: object, **kwargs: object) -> None:
        nonlocal commits
        commits += 1
        real_commit(*args, **kwargs)

    monkeypatch.setattr(store, "commit", counting_commit)
    peer = Peer(uid=0, gid=0, pid=1)
    head = controller.ledger.head_seq
    answer = await desk.handle(
        {"action": "close", "operator": "ops-7", "reason": "pit closed"}, peer
    )
    assert answer == {"ok": True, "closed": sorted({"board offline", "operator"})}
    assert commits == 1
    answer = await desk.handle({"action": "open", "operator": "ops-7", "reason": "reopen"}, peer)
    assert answer["ok"] is True and "operator" not in answer["closed"]
    assert commits == 2
    await controller.db(controller.ledger.close)
    controller.executor.close()

    with sqlite3.connect(config.ledger.path) as conn:
        rows = conn.execute(
            "SELECT kind, category, actor, data FROM journal WHERE seq > ? ORDER BY seq", (head,)
        ).fetchall()
    kinds = [(kind, category, actor) for kind, category, actor, _ in rows]
    # The operator's action, then its effect, adjacent: written together.
    assert kinds[0] == ("operator_close", "operator", "ops-7")
    assert kinds[1][1:] == ("engine", "ops-7")
    assert json.loads(rows[0][3])["reason"] == "pit closed"
    assert ("operator_open", "operator", "ops-7") in kinds


def test_a_reload_that_adds_a_meter_describes_it_as_new() -> None:
    """params-reload's `changes`: a meter added by the reload has `old: null` (the desk's own
    copy of the description used to fail with KeyError) and matches the ledger's record."""
    from fractions import Fraction

    from progressived.core.params import MeterParams
    from progressived.daemon.operator import param_changes
    from tests.helpers import DOLLAR, table

    old = table(rate="0.1")
    new = table(rate="0.1", extra_meters=(MeterParams(id="mini", seed=100 * DOLLAR, rate=Fraction("0.01")),))
    changes = param_changes(old, new)
    assert changes["meters.mini.seed_units"] == {"old": None, "new": 100 * DOLLAR}
    assert changes["meters.mini.rate"] == {"old": None, "new": "1/100"}
    assert "meters.main.rate" not in changes
