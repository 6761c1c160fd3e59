"""The table as last journaled: what the daemon's parts read, and only the journal writes.

Split from the journal so that the parts which only read the table (the outputs, the
metrics, the link client's status, the operator desk's status) can be built before the
journal and handed to it as its observers, instead of being wired into it afterwards.
"""

from __future__ import annotations

from progressived.config.daemon import DaemonConfig
from progressived.core.params import TableParams
from progressived.engine import TableState
from progressived.ledger import Ledger


class CurrentTable:
    """The configuration in force, the state and the open ledger (its head).

    The state is immutable, so a reader on another thread (the metrics' HTTP thread) gets a
    whole one by reading the reference once. Only :class:`~progressived.daemon.journal.Journal`
    assigns ``state`` (after a commit) and ``config`` (after a parameter change).
    """

    def __init__(self, config: DaemonConfig, ledger: Ledger) -> None:
        self.config = config
        self.ledger = ledger
        self.state: TableState = ledger.state

    @property
    def params(self) -> TableParams:
        return self.config.params

    @property
    def head_seq(self) -> int:
        return self.ledger.head_seq
