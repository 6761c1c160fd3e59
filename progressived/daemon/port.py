"""The operator desk's narrow port into the daemon: what it may ask, and nothing more.

The desk (:mod:`progressived.daemon.operator`) submits commands, journals operator events and
reads a status snapshot through :class:`DeskPort`; it never touches the composed daemon's
fields. Only types live here, so the desk and the daemon both depend on this module and not
on each other.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from progressived.config.daemon import DaemonConfig
from progressived.daemon.link_out import Outgoing
from progressived.engine import Command, TableState
from progressived.engine.events import Event


@dataclass(frozen=True, slots=True)
class Note:
    """An operator or system event journaled in the same transaction as a command."""

    kind: str
    detail: Mapping[str, Any]
    actor: str


class RefusalCode(enum.StrEnum):
    """Why the journal did not take a command: what its callers match on (never the text)."""

    REJECTED = "rejected"
    """The engine refused it (its own code is logged, counted and journaled)."""
    LEDGER_UNAVAILABLE = "ledger-unavailable"
    """The ledger refused the write, or is unavailable (the progressive is closed)."""
    DUPLICATE = "duplicate"
    """Its idempotency key was journaled before: the same input, not applied twice."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Committed:
    """A command journaled and taken: its events (none for one that changed nothing), the
    journal rows it wrote (``seqs``; empty when none) and the link outbox messages it
    queued (``link``; None on a table without linked meters or for a repeated input)."""

    events: tuple[Event, ...]
    seqs: range
    link: Outgoing | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandRefused:
    """A command not taken: ``code`` to match on, ``reason`` in words for a person."""

    code: RefusalCode
    reason: str


Submitted = Committed | CommandRefused
"""What :meth:`Journal.submit` returns (and the operator desk's port passes on)."""


@dataclass(frozen=True, slots=True)
class LinkedMeterView:
    """A linked meter as the link last published it (``units`` None: not heard yet);
    ``meter`` is the table's id for it, ``link_meter`` the link's."""

    meter: str
    units: int | None
    epoch: int
    lseq: int
    link_meter: str = ""


@dataclass(frozen=True, slots=True)
class LinkStatus:
    """A linked table's view of its link (docs/link.md, "Table side"), for ``status``.

    ``up``: heartbeats arriving; ``since``: when ``up`` last changed (UTC; the daemon's
    start until the first change). ``outbox_depth``: messages awaiting the link's final
    result; ``outbox_oldest_s``: the age of the oldest (from its ``at``), None when empty.
    ``closed``: the linked meters are closed at this table (``link-down``, or a refusal
    resending cannot cure). ``refused``: that refusal's code (``None`` when the link has
    not refused this table so), ``refused_reason`` the link's words for it (when this run
    received them).
    ``unreadable``: messages on the link's topics the table could not read, per refusal
    code (since start).
    """

    link_id: str
    up: bool
    since: str
    heard: bool  # a heartbeat since the daemon started
    heartbeat_age_s: float  # since the last heartbeat (since the start when none)
    broker_connected: bool
    outbox_depth: int
    outbox_oldest_s: float | None
    resends: int
    meters: tuple[LinkedMeterView, ...]
    closed: bool
    refused: str | None = None
    refused_reason: str = ""
    unreadable: tuple[tuple[str, int], ...] = ()  # (code, count): link messages ignored


@dataclass(frozen=True, slots=True)
class DeskStatus:
    """A read-only snapshot of the table for ``status``."""

    table_id: str
    paytable_id: str
    version: str
    state: TableState
    meter_ids: tuple[str, ...]
    board_online: bool
    board_counters: Mapping[str, int]
    broker_connected: bool
    ledger_ok: bool
    ledger_error: str
    head_seq: int
    ledger_path: Path
    healthy: bool
    health: str
    metrics_port: int | None
    link: LinkStatus | None = None  # a table that joined a link; None for a single table
    # The broker session: connecting / connected / unreachable / not authorised, why not
    # connected, and the topics on which the broker refuses this table's publishes.
    broker_state: str = ""
    broker_error: str = ""
    broker_denied: Mapping[str, str] = field(default_factory=dict)
    broker_denied_total: int = 0
    archive: Mapping[str, Any] | None = None  # the archive's view (docs/archive.md)
    # Payout slips (docs/slips.md): the printer and its queue, when ``[slips.printer]``.
    slips: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ParameterPlan:
    """New parameters checked against the running table: what changes, what is journaled."""

    config: DaemonConfig
    changes: Mapping[str, Any]
    detail: Mapping[str, Any]
    actor: str  # the operator who asked


@dataclass(frozen=True, slots=True)
class SlipVoided:
    """A payout slip voided by an operator, and the serial it was reissued under, if any."""

    serial: str
    reissued_as: str | None


ParameterCheck = Callable[[TableState, DaemonConfig], "ParameterPlan | str"]
"""Given the current state and configuration (under the journal's lock): a plan, or why not."""


class DeskPort(Protocol):
    """What the operator desk may do to the daemon."""

    def now(self) -> str:
        """The time for a new command (UTC, ISO 8601)."""
        ...

    def status(self) -> DeskStatus: ...

    async def submit(self, command: Command, *, note: Note | None = None) -> Submitted:
        """Decide and journal ``command`` (with ``note``, in one transaction)."""
        ...

    async def record(self, kind: str, detail: Mapping[str, Any], *, actor: str) -> bool:
        """Journal (and publish) an operator or system event; False if the ledger is down."""
        ...

    async def change_parameters(self, check: ParameterCheck) -> ParameterPlan | str:
        """Run ``check`` under the journal's lock; journal and apply its plan if it changes
        anything. Returns the plan, or why not."""
        ...

    async def void_slip(
        self, serial: str, *, reason: str, by: str, reissue: bool
    ) -> SlipVoided | str:
        """Void payout slip ``serial`` (and, with ``reissue``, issue it again under the next
        serial) in one transaction; what was done, or why not (docs/slips.md)."""
        ...

    async def reprint_slip(self, serial: str, *, reason: str, by: str) -> int | str:
        """Journal a reprint of ``serial`` (printed as ``REPRINT n``) and wake the printer;
        ``n``, or why not."""
        ...

    async def print_now(self, serial: str) -> list[str] | str:
        """Wake the slip printer's queue for the copies of ``serial`` still waiting (their
        labels), or why not (no printer, nothing waiting)."""
        ...
