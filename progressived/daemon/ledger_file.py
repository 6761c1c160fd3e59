"""The table's ledger file deleted or replaced under the running daemon.

SQLite goes on writing into the file it opened: after ``rm`` of the ledger (or a restore
that put another file at its path) rounds would be journaled into an unlinked inode that
nobody sees and that vanishes with the process. So the upkeep looks every second whether
the path still names the open file (:meth:`~progressived.ledger.handle.LedgerHandle.
file_problem`). When it does not:

* the progressive closes as for an unavailable ledger (``ledger_ok`` false: LOCK refused,
  the signs CLOSED), with the reason in ``status``, ``health``, the log and the unit's
  status line (docs/operations.md, "Health");
* the rows the daemon holds are saved beside the path (``PATH.rescued-TIME``, SQLite's
  online backup of the open connection, WAL included), and saved again whenever a row is
  added while it lasts: the operator's copy to put back, since a restart closes the only
  other one;
* the watchdog goes on pinging (degraded, not failed): a restart would lose that file.

When the path names the open file again (moved back), the usual retry reopens the
progressive.
"""

from __future__ import annotations

from pathlib import Path

import structlog

from progressived.daemon.health import Health
from progressived.daemon.ledger_writer import LedgerWriter
from progressived.ledger import LedgerError
from progressived.storage.sqlite import rescue_path

log = structlog.get_logger("progressived")


class LedgerFileWatch:
    """Compares the ledger's path with its open file; closes, says and rescues."""

    def __init__(self, writer: LedgerWriter, health: Health) -> None:
        self.writer = writer
        self.health = health
        self.rescue: Path | None = None
        self.saved_head = -1
        self.save_error = ""
        self.announce = False  # the change not yet said (once the copy is tried)

    async def check(self) -> bool:
        """Whether the file is gone now (then nothing else of the ledger's upkeep runs)."""
        ledger = self.writer.current.ledger
        problem = ledger.file_problem() or ""
        if problem != self.health.ledger_file:
            self.health.ledger_file = problem
            if problem:
                if self.rescue is None:  # deleted, then replaced: the same copy, kept current
                    self.rescue = rescue_path(ledger.path, self.writer.clock())
                self.saved_head, self.announce = -1, True
                self.health.last_error = self.words(problem)  # before ledger_ok: read at once
                self.health.ledger_ok = False
            else:
                self.rescue = None
                log.info("ledger file back at its path", path=str(ledger.path))
        if problem and self.saved_head != ledger.head_seq:
            await self._save(problem)
        return bool(problem)

    async def _save(self, problem: str) -> None:
        assert self.rescue is not None
        ledger = self.writer.current.ledger
        head = ledger.head_seq
        try:
            await self.writer.executor.run(ledger.save_copy, self.rescue)
        except (LedgerError, OSError) as exc:
            error = f"could not save its rows to {self.rescue}: {exc}"
            if error != self.save_error:
                log.error("ledger file gone: the rescue copy failed", error=error)
            self.save_error = error
        else:
            self.saved_head, self.save_error = head, ""
        self.health.last_error = self.words(problem)
        if self.announce:  # once per change, whether or not the copy could be made
            self.announce = False
            log.error("ledger file gone: the progressive is closed", reason=self.health.last_error)
            self.writer.observers.changed()

    def words(self, problem: str) -> str:
        """The reason, and what to do, as status, health and the log say it."""
        path = self.writer.current.ledger.path
        if self.save_error:
            saved = self.save_error
        else:
            saved = f"its rows are saved to {self.rescue} (kept current while the daemon runs)"
        return (
            f"{problem}: the progressive is closed; {saved}: stop the daemon, verify that "
            f"copy (progressivectl ledger verify --db), put it at {path}, start the daemon"
        )
