"""The daemon's output is pure JSON lines, even while the broker is frozen.

A frozen broker leaves the daemon's publishes without PUBACK; after the reconnect the
outbox's backlog goes out at once and aiomqtt warns through the standard library's logging
("There are 11 pending publish calls."). That line, and every other, must reach the journal
as ``<N>`` + one JSON object, like the daemon's own lines.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.daemon_harness import table

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)


@pytest.mark.timeout(90)
async def test_every_line_of_the_daemon_output_is_json_through_a_broker_freeze(
    tmp_path: Path,
) -> None:
    async with table(tmp_path) as t:
        # Publishes time out quickly so that the freeze forces a reconnect and a backlog.
        t.config.write_text(
            t.config.read_text().replace(
                "keepalive_s = 5", "keepalive_s = 5\npublish_timeout_s = 1"
            )
        )
        t.start_daemon()
        await t.online()
        t.broker.freeze()
        try:
            for _ in range(14):  # refused keys: each journaled and published as key_refused
                t.sim.press("H1")
                await asyncio.sleep(0.05)
            await asyncio.sleep(2.5)
        finally:
            t.broker.thaw()
        await t.sub.wait_event("key_refused", 14, timeout=30)
        await asyncio.sleep(0.5)
    text = t.log()
    lines = text.splitlines()
    assert lines
    parsed = []
    for line in lines:
        assert line.startswith("<") and ">" in line[:4], f"not a journald JSON line: {line!r}"
        parsed.append(json.loads(line[line.index(">") + 1 :]))
    library = [p for p in parsed if p.get("logger") == "mqtt"]
    assert any("pending publish calls" in str(p["event"]) for p in library), [
        p["event"] for p in parsed if p.get("level") == "warning"
    ]
