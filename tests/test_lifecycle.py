"""The process lifecycle both controllers share (progressived/runtime/lifecycle.py)."""

from __future__ import annotations

import asyncio

import structlog
from structlog.testing import capture_logs

from progressived.runtime.lifecycle import INTERRUPTED, Lifecycle

log = structlog.get_logger("test")


async def _ended(lifecycle: Lifecycle) -> None:
    async def ends() -> None:
        raise RuntimeError("gone")

    task = asyncio.get_running_loop().create_task(ends(), name="core")
    lifecycle.watch(task)
    await asyncio.wait({task})
    await asyncio.sleep(0)  # the done callback runs on the next turn of the loop


def test_sigterm_is_status_0_and_ctrl_c_130() -> None:
    async def main() -> tuple[int, int]:
        stopped, interrupted = Lifecycle(log, "ended"), Lifecycle(log, "ended")
        stopped.request_stop()
        interrupted.request_stop(True)
        return stopped.status(), interrupted.status()

    assert asyncio.run(main()) == (0, INTERRUPTED)


def test_a_core_task_ending_on_its_own_stops_with_status_1_and_one_line() -> None:
    async def main() -> Lifecycle:
        lifecycle = Lifecycle(log, "core task ended")
        await _ended(lifecycle)
        return lifecycle

    with capture_logs() as logs:
        lifecycle = asyncio.run(main())
    assert lifecycle.stop.is_set() and lifecycle.status() == 1
    assert [(e["event"], e["task"]) for e in logs] == [("core task ended", "core")]


def test_a_task_ending_when_quiet_or_after_a_stop_is_not_a_fault() -> None:
    async def main() -> tuple[Lifecycle, Lifecycle]:
        quiet = Lifecycle(log, "ended", quiet=lambda: True)
        await _ended(quiet)
        stopping = Lifecycle(log, "ended")
        stopping.request_stop()
        await _ended(stopping)
        return quiet, stopping

    with capture_logs() as logs:
        quiet, stopping = asyncio.run(main())
    assert not quiet.stop.is_set() and quiet.status() == 0
    assert stopping.status() == 0
    assert logs == []


def test_a_faults_status_outlives_a_later_ctrl_c() -> None:
    async def main() -> int:
        lifecycle = Lifecycle(log, "ended")
        lifecycle.fail(5)
        lifecycle.request_stop(True)
        return lifecycle.status()

    assert asyncio.run(main()) == 5
