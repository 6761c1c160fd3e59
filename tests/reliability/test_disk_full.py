"""The disk fills up under the running daemon, and space comes back.

Two ways to fill it: a size limit on the daemon's files (RLIMIT_FSIZE, set on the running
process with ``prlimit``: writes past it fail with EFBIG; needs no privilege), and a real
full filesystem — the ledger on its own 16 MB tmpfs filled by another file (ENOSPC; needs
permission to mount, skipped otherwise). The daemon's output goes to a pipe, which the limit does not
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

from tests.daemon_harness import Table, init_ledger
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


class SizeLimit:
    """RLIMIT_FSIZE on the running daemon: writes past the limit fail with EFBIG."""

    def __init__(self, db: Path, pid: int) -> None:
        self.db, self.pid = db, pid
        self.hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]

    def fill(self) -> None:
        limit = files_size(self.db) + 16 * 1024  # a few more pages and then no more
        resource.prlimit(self.pid, resource.RLIMIT_FSIZE, (limit, self.hard))

    def free(self) -> None:
        resource.prlimit(self.pid, resource.RLIMIT_FSIZE, (self.hard, self.hard))

    def close(self) -> None:
        pass


class SmallFilesystem:
    """The ledger on its own 16 MB tmpfs; a filler file takes the space (ENOSPC)."""

    def __init__(self, mount: Path) -> None:
        self.mount = mount
        mount.mkdir()
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
            capture_output=True, text=True, check=False,
        )
        if result.returncode != 0:
            pytest.skip(f"cannot mount a small tmpfs here: {result.stderr.strip()}")
        self.filler = mount / "filler"

    def fill(self) -> None:
        # Unbuffered, so that nothing is left to flush (and fail) at close; big pieces
        # first, then smaller ones until not one byte fits.
        with self.filler.open("ab", buffering=0) as f:
            for size in (65536, 4096, 512, 1):
                piece = b"\xff" * size
                with contextlib.suppress(OSError):
                    while True:
                        f.write(piece)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.mount)], check=False, capture_output=True)


async def disk_full_cycles(t: Table, db: Path, disk: SizeLimit | SmallFilesystem,
                           out: list[str], what: str) -> None:
    for _ in range(OUTAGES):
        before = check_nothing_acknowledged_lost(t, db)
        disk.fill()
        async with asyncio.timeout(60):
            while t.sub.meters()[-1]["state"] != "closed":
                # A round that cannot be journaled times out: expected once full.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(scripted_round(t), timeout=5)
        await asyncio.sleep(0.5)
        text = "".join(out)
        assert "ledger unavailable: the progressive is closed" in text, text[-3000:]
        assert "cannot be written" in text, text[-3000:]
        line = [x for x in out if "ledger unavailable" in x][-1].strip()
        if not any(n.startswith(what) for n in NOTES):
            NOTES.append(f"{what}: {line}")
        # Full: LOCK is not accepted (nothing is journaled, nothing published).
        locked = len(t.sub.events("round_locked"))
        for seat in (1, 2):
            t.sim.place_bet(seat)
        await asyncio.sleep(0.3)
        t.sim.press("LOCK")
        await asyncio.sleep(2.0)
        assert len(t.sub.events("round_locked")) == locked
        assert t.sub.meters()[-1]["state"] == "closed"
        assert t.proc is not None and t.proc.poll() is None, "the daemon kept running"
        TALLY["locks_refused_while_full"] += 1
        for seat in (1, 2):
            t.sim.remove_bet(seat)
        # Nothing committed before is lost (the ledger is read while still full).
        assert check_nothing_acknowledged_lost(t, db) >= before
        # Space comes back: the daemon resumes by itself (it retries every second).
        disk.free()
        await t.sub.wait(lambda: t.sub.meters()[-1]["state"] == "open", "open again", timeout=30)
        TALLY[f"{what}_outages"] += 1
        await scripted_round(t)
    await asyncio.sleep(1.0)
    check_all_published(t, db)
    TALLY["published_events_checked"] += check_nothing_acknowledged_lost(t, db)
    assert t.kill(signal.SIGTERM) == 0
    ctl_verify(db)


@pytest.mark.timeout(3600)
async def test_size_limit_closes_the_table_and_resumes(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    out: list[str] = []
    async with rig(tmp_path) as t:
        t.proc = start_daemon_piped(t.config, out)
        await t.online()
        await scripted_round(t)
        await disk_full_cycles(t, db, SizeLimit(db, t.proc.pid), out, "disk_full_rlimit")


@pytest.mark.timeout(3600)
async def test_full_filesystem_closes_the_table_and_resumes(tmp_path: Path) -> None:
    """The same on a real full filesystem (needs permission to mount a tmpfs; else skipped)."""
    disk = SmallFilesystem(tmp_path / "small")
    try:
        db = disk.mount / "ledger.db"
        out: list[str] = []
        async with rig(tmp_path) as t:
            t.config.write_text(t.config.read_text().replace(str(tmp_path / "ledger.db"), str(db)))
            init_ledger(t.config)
            t.proc = start_daemon_piped(t.config, out)
            await t.online()
            await scripted_round(t)
            await disk_full_cycles(t, db, disk, out, "disk_full_enospc")
    finally:
        disk.close()
