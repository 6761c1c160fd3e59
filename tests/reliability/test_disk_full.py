"""The disk fills up under the running daemon, and space comes back.

"Full" is a size limit on the daemon's files (RLIMIT_FSIZE, set on the running process with
``prlimit``: writes past it fail with EFBIG, as they fail with ENOSPC on a full disk; no
root or loop mount needed). The daemon's output goes to a pipe, which the limit does not
touch. While full: the daemon logs a clear error, the meter shows ``closed`` and LOCK is not
accepted; nothing committed before is lost. When the limit is lifted the daemon resumes by
itself (it retries every second) and a complete round plays.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.reliability.rig import (
    NOTES,
    OUTAGES,
    TALLY,
    check_all_published,
    check_nothing_acknowledged_lost,
    ctl_verify,
    rig,
    scripted_round,
)

pytestmark = pytest.mark.reliability


def start_daemon_piped(config: Path, out: list[str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "progressived.cli.daemon", "run", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line.decode(errors="replace"))

    threading.Thread(target=read, daemon=True).start()
    return proc


def files_size(db: Path) -> int:
    return max(
        (p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file()), default=0
    )


@pytest.mark.timeout(3600)
async def test_disk_full_closes_the_table_and_resumes(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    out: list[str] = []
    async with rig(tmp_path) as t:
        proc = start_daemon_piped(t.config, out)
        t.proc = proc
        await t.online()
        await scripted_round(t)
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        for _ in range(OUTAGES):
            before = check_nothing_acknowledged_lost(t, db)
            # The disk fills: a few more pages and then no more.
            limit = files_size(db) + 16 * 1024
            resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (limit, hard))
            async with asyncio.timeout(60):
                while t.sub.meters()[-1]["state"] != "closed":
                    # A round that cannot be journaled times out: expected once full.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(scripted_round(t), timeout=5)
            await asyncio.sleep(0.5)
            text = "".join(out)
            assert "ledger unavailable: the progressive is closed" in text, text[-3000:]
            assert "cannot be written" in text, text[-3000:]
            if not NOTES:
                NOTES.append(
                    "disk full: "
                    + next(line for line in out if "ledger unavailable" in line).strip()
                )
            # Full: LOCK is not accepted (nothing is journaled, nothing published).
            locked = len(t.sub.events("round_locked"))
            for seat in (1, 2):
                t.sim.place_bet(seat)
            await asyncio.sleep(0.3)
            t.sim.press("LOCK")
            await asyncio.sleep(2.0)
            assert len(t.sub.events("round_locked")) == locked
            assert t.sub.meters()[-1]["state"] == "closed"
            assert proc.poll() is None, "the daemon kept running"
            for seat in (1, 2):
                t.sim.remove_bet(seat)
            # Nothing committed before is lost (the ledger is read while still "full").
            assert check_nothing_acknowledged_lost(t, db) >= before
            # Space comes back: the daemon resumes by itself.
            resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (hard, hard))
            await t.sub.wait(
                lambda: t.sub.meters()[-1]["state"] == "open", "open again", timeout=30
            )
            TALLY["disk_full_outages"] += 1
            await scripted_round(t)
        await asyncio.sleep(1.0)
        check_all_published(t, db)
        TALLY["published_events_checked"] += check_nothing_acknowledged_lost(t, db)
        assert t.kill(signal.SIGTERM) == 0
    ctl_verify(db)
