"""The link controller as its status, health gauges and metrics show it: one frozen
:class:`ControllerSnapshot`, taken on the event loop and replaced whole.

Why: the Prometheus endpoint runs on its own thread. It used to read the controller's live
parts while the event loop changed them (the ``heard`` dict iterated as a batch inserted
into it, or a stand-down cleared it: ``dictionary changed size during iteration``). Now the
loop copies what the views need into a snapshot (:meth:`Snapshots.publish`: at least every
:data:`PUBLISH_S`, and before each ``status`` the control socket answers) and replaces the
published one in a single assignment; the metrics thread and the control socket read only
a snapshot (:mod:`progressived.link.runtime.views` renders it), which nothing changes
after it is taken. The mappings in it are read-only copies.

The book's figures are copied too (not the book), so that how the book keeps its state
stays the book's business.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from progressived.engine import accounts
from progressived.link.core import params as lp
from progressived.link.core.ports import LinkJournal
from progressived.link.runtime.leadership import Leadership, LeaseView
from progressived.link.runtime.ledger_thread import LedgerHealth
from progressived.link.runtime.mqtt_adapter import LinkMqtt
from progressived.link.runtime.refusals import Refusals
from progressived.link.runtime.traffic import Traffic

PUBLISH_S = 0.25  # the metrics read a snapshot at most about this old
K = TypeVar("K")
V = TypeVar("V")


def _frozen(mapping: Mapping[K, V]) -> Mapping[K, V]:
    """A read-only copy (one C call: safe on the loop, whatever the mapping)."""
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True, kw_only=True)
class MeterFigures:
    """One linked meter's balances (units) and epoch."""

    units: int
    reserve: int
    overflow: int
    pending: int
    paid: int
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BookFigures:
    """The committed book (an active controller's; a standby holds none)."""

    lseq: int
    head_seq: int
    head_hash: str
    meters: Mapping[str, MeterFigures]  # in the configuration's order
    hwm: Mapping[str, int]  # member table -> last sequence applied, sorted by table


@dataclass(frozen=True, slots=True, kw_only=True)
class InboxFigures:
    """The inbox of the latest term (docs/link.md, "Fair share")."""

    depth: int
    high_water: int
    lane_max: int
    waiting: Mapping[str, int]  # lane -> messages waiting (lanes with any)
    dropped: Mapping[str, int]  # lane -> messages dropped


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerFigures:
    """The broker sessions of the latest term: the first broker's, and each broker's view."""

    connected: bool  # to at least one broker
    connected_count: int
    state: str
    detail: str
    denied: Mapping[str, str]  # topic -> why the broker refused a publish there
    denied_total: int
    brokers: tuple[Mapping[str, object], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerSnapshot:
    """Everything the status, the health gauges and the metrics read (see the module)."""

    taken: float  # monotonic
    link: str
    version: str
    policy: str
    lease: LeaseView
    book: BookFigures | None  # None: a standby
    counts: Mapping[str, int]
    batches: int
    heard: Mapping[str, float]  # member table -> monotonic time last heard
    unreadable: Mapping[str, int]
    refusals: Mapping[tuple[str, str], int]  # (table label, code) -> refusals
    answers_dropped: Mapping[str, int]
    inbox: InboxFigures
    broker: BrokerFigures
    ledger_error: str | None


def book_figures(params: lp.LinkParams, journal: LinkJournal) -> BookFigures:
    state, head = journal.book, journal.head
    meters = {
        spec.id: MeterFigures(
            units=state.balances.get(accounts.meter(spec.id), 0),
            reserve=state.balances.get(accounts.reserve(spec.id), 0),
            overflow=state.balances.get(accounts.overflow(spec.id), 0),
            pending=state.balances.get(accounts.pending(spec.id), 0),
            paid=state.balances.get(accounts.paid_attendant(spec.id), 0),
            epoch=state.epochs.get(spec.id, 0),
        )
        for spec in params.meters
    }
    hwm = {}
    for table in sorted(params.tables):
        track = state.tables.get(table)
        hwm[table] = 0 if track is None else track.hwm
    return BookFigures(
        lseq=state.lseq,
        head_seq=head.seq,
        head_hash=head.hash,
        meters=MappingProxyType(meters),
        hwm=MappingProxyType(hwm),
    )


def inbox_figures(mqtt: LinkMqtt) -> InboxFigures:
    inbox = mqtt.inbox
    return InboxFigures(
        depth=inbox.qsize(),
        high_water=inbox.high_water,
        lane_max=inbox.lane_max,
        waiting=_frozen(inbox.depths()),
        dropped=_frozen(inbox.dropped),
    )


def broker_figures(mqtt: LinkMqtt) -> BrokerFigures:
    session = mqtt.session
    return BrokerFigures(
        connected=mqtt.connected,
        connected_count=mqtt.connected_count,
        state=session.state,
        detail=session.detail,
        denied=_frozen(session.denied),
        denied_total=session.denied_total,
        brokers=tuple(MappingProxyType(view) for view in mqtt.views()),
    )


class Snapshots:
    """Takes the controller's snapshot on the event loop and publishes it (see the module).

    Given the parts that live as long as the process; the term's journal and broker
    sessions are given to each :meth:`publish` (a standby has no journal; its broker
    sessions are the last term's, never started before the first).
    """

    def __init__(
        self,
        *,
        params: lp.LinkParams,
        version: str,
        leadership: Leadership,
        traffic: Traffic,
        refusals: Refusals,
        health: LedgerHealth,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.params, self.version = params, version
        self.leadership, self.traffic, self.refusals, self.health = (
            leadership,
            traffic,
            refusals,
            health,
        )
        self._monotonic = monotonic
        self._current: ControllerSnapshot | None = None

    @property
    def current(self) -> ControllerSnapshot:
        """The latest published snapshot (any thread: one read of one attribute)."""
        current = self._current
        assert current is not None, "the controller publishes one before anything reads"
        return current

    def publish(self, journal: LinkJournal | None, mqtt: LinkMqtt) -> ControllerSnapshot:
        """Take a snapshot of the controller now and publish it (the event loop only)."""
        taken = self.take(journal, mqtt)
        self._current = taken
        return taken

    def take(self, journal: LinkJournal | None, mqtt: LinkMqtt) -> ControllerSnapshot:
        params, traffic, refusals = self.params, self.traffic, self.refusals
        return ControllerSnapshot(
            taken=self._monotonic(),
            link=params.link_id,
            version=self.version,
            policy=params.policy.value,
            lease=self.leadership.seen(),
            book=None if journal is None else book_figures(params, journal),
            counts=_frozen(traffic.counts),
            batches=traffic.batches,
            heard=_frozen(traffic.heard),
            unreadable=_frozen(refusals.unreadable),
            refusals=_frozen(refusals.by_table),
            answers_dropped=_frozen(refusals.answers_dropped),
            inbox=inbox_figures(mqtt),
            broker=broker_figures(mqtt),
            ledger_error=self.health.error,
        )
