"""The link controller process: the tables' messages -> the link book -> the link ledger ->
results, heartbeats and the retained linked meters (docs/link.md).

Composed of small parts (:mod:`progressived.link.runtime.assembly`): the ledger on its own
thread behind the :class:`~progressived.link.core.ports.LinkJournal` port, the lease
(:mod:`~progressived.link.runtime.lease`), one :class:`~progressived.link.runtime.term.ActiveTerm`
per term as the active controller (broker sessions, batches, heartbeats), the snapshot the
status and the metrics read (:mod:`~progressived.link.runtime.snapshot`), the control socket.
This module runs them: it holds only the parts, the term being served and the broker
sessions the status shows.

On a ledger in a database the controller serves only while it holds the ledger's lease
(:mod:`progressived.link.runtime.leadership`): one that finds it held waits as a
**standby**, connected to no broker, and takes over when it lapses (the book rebuilt from
the ledger, as a restart does); an active one that loses it (a write refused by the fence,
or no renewal for ``lease_s``) drops its broker sessions at once, journals nothing more and
becomes a standby (``standby=False``: exits with status 5 instead, as before).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from progressived import __version__
from progressived.link.core.ports import LinkJournal
from progressived.link.runtime import views
from progressived.link.runtime.assembly import assemble, open_term
from progressived.link.runtime.config import LinkConfig
from progressived.link.runtime.mqtt_adapter import LinkMqtt
from progressived.link.runtime.snapshot import PUBLISH_S, ControllerSnapshot
from progressived.link.runtime.term import ActiveTerm
from progressived.runtime.clock import utc_now
from progressived.runtime.control import ControlServer, Peer
from progressived.runtime.systemd import Notifier

log = structlog.get_logger("progressived.link")


class LinkController:
    """One link: its parts, the term it serves (None: standing by), its control socket."""

    def __init__(
        self,
        config: LinkConfig,
        opener: Callable[[], LinkJournal],
        *,
        version: str = __version__,
        notifier: Notifier | None = None,
        clock: Callable[[], str] = utc_now,
        standby: bool = True,
    ) -> None:
        self.parts = assemble(
            config,
            opener,
            version=version,
            notifier=notifier or Notifier(),
            clock=clock,
            standby=standby,
        )
        self._term: ActiveTerm | None = None
        self._brokers = self.parts.idle_brokers  # the latest term's (the status shows them)

    @property
    def mqtt(self) -> LinkMqtt:
        """The broker sessions of the term being served, or of the last one."""
        return self._brokers

    # ------------------------------------------------------------------ views
    def publish(self) -> ControllerSnapshot:
        """Take the controller's snapshot and publish it to the views (the event loop)."""
        journal = None if self._term is None else self._term.journal
        return self.parts.snapshots.publish(journal, self._brokers)

    def status(self) -> dict[str, Any]:
        """The control socket's ``status``, from a snapshot taken now."""
        return views.status(self.publish(), time.monotonic())

    async def _publishing(self) -> None:
        """A fresh snapshot for the metrics thread at least every ``PUBLISH_S``."""
        while True:
            self.publish()
            await asyncio.sleep(PUBLISH_S)

    async def _control(self, request: Mapping[str, Any], peer: Peer) -> dict[str, Any]:
        if request.get("action") == "status":
            return {"ok": True, "status": self.status()}
        return {"ok": False, "error": "the link controller answers `status` only"}

    # ------------------------------------------------------------------ life
    async def start(self) -> LinkJournal | None:
        """Open the ledger (on its thread: it replays the book) -- or, finding its lease
        held, stand by (None) -- and the metrics endpoint. Any other fault of the ledger
        raises."""
        taken = await self.parts.lease.take(first=True)
        journal = None if isinstance(taken, float | int) else taken
        structlog.contextvars.bind_contextvars(link=self.parts.config.params.link_id)
        cfg, metrics = self.parts.config, self.parts.metrics
        if metrics is not None:
            port = metrics.serve(cfg.metrics.address, cfg.metrics.port)
            log.info("metrics", address=cfg.metrics.address, port=port)
        return journal

    @property
    def stop_requested(self) -> asyncio.Event:
        """Set by a signal, :meth:`request_stop`, a fenced stop or a core task ending."""
        return self.parts.lifecycle.stop

    def request_stop(self, interrupted: bool = False) -> None:
        """Stop (SIGTERM); ``interrupted``: a Ctrl-C, whose exit status is 130."""
        self.parts.lifecycle.request_stop(interrupted)

    async def run(self, *, install_signals: bool = True) -> int:
        """Run until SIGTERM (status 0) or SIGINT (130). The control socket is claimed
        first and the metrics port when the ledger is open (or the lease found held), so a
        second controller given the same socket or port refuses
        (:class:`~progressived.runtime.listen.ListenError`)."""
        parts = self.parts
        loop = asyncio.get_running_loop()
        if install_signals:
            parts.lifecycle.install_signals(loop)
        control = ControlServer(
            parts.config.control.socket, parts.config.control.group, self._control
        )
        control.claim()
        publishing = loop.create_task(self._publishing(), name="snapshot")
        parts.lifecycle.watch(publishing)
        try:
            journal = await self.start()
            if journal is not None:
                self._term = open_term(parts, journal)
            await control.start()
            role = "running" if self._term is not None else "standby"
            parts.notifier.ready(f"link {parts.config.params.link_id} {role}")
            while not self.stop_requested.is_set():
                if self._term is None:
                    journal = await parts.lease.stand_by(
                        self.stop_requested, parts.notifier.watchdog
                    )
                    if journal is None:
                        break
                    self._term = open_term(parts, journal)
                await self._serve(self._term)
        finally:
            parts.notifier.stopping()
            publishing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await publishing
            await control.stop()
            if self._term is not None:
                await parts.ledger_thread.close(self._term.journal)
                self._term = None
            parts.ledger_thread.shutdown()
        return parts.lifecycle.status()

    async def _serve(self, term: ActiveTerm) -> None:
        """One term as the active controller: until asked to stop or the lease is lost."""
        loop = asyncio.get_running_loop()
        parts, params = self.parts, self.parts.config.params
        self._brokers = term.mqtt
        tasks = term.start()
        parts.lifecycle.watch(*tasks)
        log.info(
            "running",
            link=params.link_id,
            tables=len(params.tables),
            meters=[m.id for m in params.meters],
            head_seq=term.journal.head.seq,
            brokers=[s.options.url for s in term.mqtt.sessions],
        )
        lost_event = parts.lease.lost
        stop = loop.create_task(self.stop_requested.wait())
        lost = loop.create_task(lost_event.wait())
        await asyncio.wait({stop, lost}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        lost.cancel()
        standing_down = (
            lost_event.is_set() and parts.lease.standby and not self.stop_requested.is_set()
        )
        await term.shutdown(tasks, drain=not lost_event.is_set())
        self._term = None
        if standing_down:
            parts.traffic.stood_down()
            parts.health.ok()  # a standby's ledger is the database's reachability
            log.info("standby: this controller no longer serves the link")
        self.publish()
