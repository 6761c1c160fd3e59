"""The link controller's parts, built in the order they depend on each other, in one place
(as :mod:`progressived.daemon.assembly` builds a table's).

Two assemblies, because the controller has two lifetimes:

* :func:`assemble` -- the parts that live as long as the process (:class:`LinkParts`): the
  ledger's thread and health, the lease (its reckoning and its keeper), the process's
  lifecycle, the counts and refusals, the snapshot the views read, the metrics. Built once,
  before the ledger is opened (a standby never opens it).
* :func:`open_term` -- the parts of one term as the active controller
  (:class:`~progressived.link.runtime.term.ActiveTerm`): built over the ledger the lease
  keeper opened, each time it takes the lease, with its own broker sessions.

Nothing is assigned into a part after it is built; each is given what it needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog

from progressived.link.core.ports import LinkJournal
from progressived.link.runtime.config import LinkConfig
from progressived.link.runtime.leadership import Leadership
from progressived.link.runtime.lease import LeaseKeeper
from progressived.link.runtime.ledger_thread import LedgerHealth, LedgerThread
from progressived.link.runtime.metrics import LinkMetrics
from progressived.link.runtime.mqtt_adapter import LinkMqtt
from progressived.link.runtime.refusals import Refusals
from progressived.link.runtime.snapshot import Snapshots
from progressived.link.runtime.term import ActiveTerm, ShownMeters
from progressived.link.runtime.traffic import Traffic
from progressived.runtime.lifecycle import Lifecycle
from progressived.runtime.systemd import Notifier

log = structlog.get_logger("progressived.link")


@dataclass(frozen=True, kw_only=True)
class LinkParts:
    """What a link controller is made of for as long as it runs."""

    config: LinkConfig
    version: str
    notifier: Notifier
    clock: Callable[[], str]
    ledger_thread: LedgerThread
    health: LedgerHealth
    leadership: Leadership
    lease: LeaseKeeper
    lifecycle: Lifecycle
    traffic: Traffic
    refusals: Refusals
    snapshots: Snapshots
    metrics: LinkMetrics | None  # built here, served once the lease is taken or found held
    idle_brokers: LinkMqtt  # never started: what the status shows before the first term


def assemble(
    config: LinkConfig,
    opener: Callable[[], LinkJournal],
    *,
    version: str,
    notifier: Notifier,
    clock: Callable[[], str],
    standby: bool,
) -> LinkParts:
    """The process's parts; ``standby``: wait for a lease held by another (else exit 5)."""
    params = config.params
    ledger_thread, health = LedgerThread(), LedgerHealth()
    leadership = Leadership(config.ledger.lease_holder(), config.ledger.lease_s)
    # a task ending once the lease is lost is the stand-down, not a crash
    lifecycle = Lifecycle(log, "core task ended: stopping", quiet=leadership.lost)
    lease = LeaseKeeper(
        leadership=leadership,
        ledger_thread=ledger_thread,
        health=health,
        opener=opener,
        standby=standby,
        heartbeat_s=config.heartbeat_s,
        fail=lifecycle.fail,
    )
    traffic, refusals = Traffic(), Refusals(params.tables)
    snapshots = Snapshots(
        params=params,
        version=version,
        leadership=leadership,
        traffic=traffic,
        refusals=refusals,
        health=health,
    )
    idle = brokers(config, leadership, None)
    snapshots.publish(None, idle)  # the first, before anything reads one
    metrics = None
    if config.metrics.enabled:
        metrics = LinkMetrics(params.link_id, lambda: snapshots.current)
    return LinkParts(
        config=config,
        version=version,
        notifier=notifier,
        clock=clock,
        ledger_thread=ledger_thread,
        health=health,
        leadership=leadership,
        lease=lease,
        lifecycle=lifecycle,
        traffic=traffic,
        refusals=refusals,
        snapshots=snapshots,
        metrics=metrics,
        idle_brokers=idle,
    )


def brokers(
    config: LinkConfig, leadership: Leadership, on_connect: Callable[[], None] | None
) -> LinkMqtt:
    """A term's broker sessions, publishing only while the lease is held."""
    return LinkMqtt(
        config.mqtt,
        config.params.link_id,
        tables=config.params.tables,
        on_connect=on_connect,
        gate=leadership.holds,
    )


def open_term(parts: LinkParts, journal: LinkJournal) -> ActiveTerm:
    """One term's parts over ``journal`` (opened by the lease keeper)."""
    config = parts.config
    meters = ShownMeters(config.params, config.mqtt.prefix, journal)

    def republish() -> None:
        """Every linked meter, retained, to every broker (each (re)connection)."""
        mqtt.send(meters.everything(), everywhere=True)

    mqtt = brokers(config, parts.leadership, republish)
    return ActiveTerm(
        config=config,
        journal=journal,
        mqtt=mqtt,
        meters=meters,
        ledger_thread=parts.ledger_thread,
        health=parts.health,
        lease=parts.lease,
        traffic=parts.traffic,
        refusals=parts.refusals,
        metrics=parts.metrics,
        notifier=parts.notifier,
        clock=parts.clock,
    )
