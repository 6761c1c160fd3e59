"""The journal's entry point returns what happened: the events and the rows it journaled,
or a refusal with a code its callers match on (real SQLite ledger, the daemon's parts)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from progressived.daemon.port import CommandRefused, Committed, RefusalCode
from progressived.engine import Lock, SetClosed
from progressived.testing.broker import Mosquitto
from tests.test_crash_only import boardless


def journaled(path: Path, after: int) -> list[tuple[int, str, str]]:
    with sqlite3.connect(path) as conn:
        return list(
            conn.execute("SELECT seq, kind, data FROM journal WHERE seq > ? ORDER BY seq", (after,))
        )


async def test_submit_says_committed_refused_or_duplicate(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    config, controller = boardless(tmp_path, mosquitto)
    await controller.start()
    try:
        # Committed: the events taken, and exactly the rows that journaled them.
        head = controller.ledger.head_seq
        closing = SetClosed(reason="maintenance", closed=True, actor="ops-1")
        done = await controller.submit(closing, idempotency_key="k-1")
        assert isinstance(done, Committed) and done.link is None
        assert [e.kind for e in done.events] == ["table_closed"]
        assert done.seqs == range(head + 1, controller.ledger.head_seq + 1)
        rows = journaled(config.ledger.path, head)
        assert [seq for seq, _, _ in rows] == list(done.seqs)
        assert [kind for _, kind, _ in rows] == ["table_closed"]
        assert "maintenance" in controller.state.closed

        # Nothing to do: committed, with no events and no rows.
        head = controller.ledger.head_seq
        again = await controller.submit(closing)
        assert again == Committed(events=(), seqs=range(0))
        assert controller.ledger.head_seq == head

        # The same idempotency key again (another command): a duplicate, nothing taken.
        state = controller.state
        other = SetClosed(reason="other", closed=True, actor="ops-1")
        repeat = await controller.submit(other, idempotency_key="k-1")
        assert isinstance(repeat, CommandRefused) and repeat.code is RefusalCode.DUPLICATE
        assert controller.state is state and "other" not in controller.state.closed
        assert controller.ledger.head_seq == head

        # The engine refuses (closed): the refusal's words are what is journaled.
        refused = await controller.submit(Lock(actor="dealer"))
        assert isinstance(refused, CommandRefused) and refused.code is RefusalCode.REJECTED
        assert controller.state is state
        ((_, kind, data),) = journaled(config.ledger.path, head)
        assert kind == "command_rejected"
        assert json.loads(data)["reason"] == refused.reason
    finally:
        await controller.db(controller.ledger.close)
        controller.executor.close()
