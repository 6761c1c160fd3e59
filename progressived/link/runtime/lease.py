"""The link controller's lease: take it (waiting as a standby), keep it, lose it
(docs/link.md, "The standby controller and two brokers").

A standby is a controller that found the ledger's lease held: connected to no broker, it
tries the lease again every :meth:`~progressived.link.runtime.leadership.Leadership.poll_s`
(pinging the systemd watchdog), and once it holds it the ledger is read -- the latest
snapshot and the rows after it, as a restart does -- and it serves. An active controller
renews its lease thrice a term; a renewal refused by the fence, none for a whole term, or a
commit refused by the fence loses it: the controller stops serving at once (its broker
sessions dropped, nothing more journaled or published) and stands by again, or, run with
``--no-standby``, exits with status 5.

:class:`LeaseKeeper` does these steps; what they leave known of the lease is its
:class:`~progressived.link.runtime.leadership.Leadership`'s state
(:class:`~progressived.link.runtime.leadership.LeaseState`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable

import structlog

from progressived.ledger import Fenced, LeaseHeld, LedgerUnavailable
from progressived.link.core.ports import LinkJournal
from progressived.link.runtime.leadership import Leadership, lease_of
from progressived.link.runtime.ledger_thread import LedgerHealth, LedgerThread

log = structlog.get_logger("progressived.link")
FENCED_EXIT = 5  # the ledger is another controller's now (docs/operations.md: exit 5)


class LeaseKeeper:
    """Takes, renews and loses the link ledger's lease (see the module).

    ``opener`` opens the ledger (acquiring the lease on a database); ``standby``: wait for a
    lease held by another (else a held lease at start, or a lost one, is exit 5, through
    ``fail``). ``lost`` is set when this term's lease is lost (each term has a new one).
    """

    def __init__(
        self,
        *,
        leadership: Leadership,
        ledger_thread: LedgerThread,
        health: LedgerHealth,
        opener: Callable[[], LinkJournal],
        standby: bool,
        heartbeat_s: float,
        fail: Callable[[int], None],
    ) -> None:
        self.leadership = leadership
        self.ledger_thread = ledger_thread
        self.health = health
        self.opener = opener
        self.standby = standby
        self.heartbeat_s = heartbeat_s
        self.fail = fail
        self.lost = asyncio.Event()

    def lose(self, why: str) -> None:
        """This controller no longer holds the link's lease: stop serving at once (the
        broker sessions dropped, nothing more journaled) and stand by, or (``standby``
        off) stop with status 5 (docs/link.md)."""
        if self.lost.is_set():
            return
        self.leadership.stood_down()
        then = "standing by" if self.standby else "stopping"
        log.error(f"link ledger lease lost: {then}", why=why)
        self.lost.set()
        if not self.standby:
            self.fail(FENCED_EXIT)

    async def hold(self, journal: LinkJournal) -> None:
        """Renew the lease (thrice a term; each commit extends it too) while it is held:
        a renewal refused by the fence, or none for a whole term, loses it. A database out
        of reach is logged once; the commits that fail meanwhile say the rest."""
        lead = self.leadership
        while True:
            await asyncio.sleep(lead.renew_every_s(self.heartbeat_s))
            started = time.monotonic()
            try:
                left = lead.term_left_s()
                async with asyncio.timeout(None if left == math.inf else max(0.0, left)):
                    await self.ledger_thread.run(journal.renew)
            except Fenced as exc:
                self.lose(f"the lease was refused on renewal: {exc}")
                return
            except LedgerUnavailable as exc:
                if lead.unrenewed():
                    log.warning("link ledger lease not renewed", error=str(exc))
            except TimeoutError:
                pass  # the term ended while the renewal was on its way: see below
            else:
                lead.renewed(started, lease_of(journal))
            if not lead.holds():
                self.lose(f"the lease was not renewed for its whole term ({lead.lease_s} s)")
                return

    async def take(self, *, first: bool = False) -> LinkJournal | float:
        """One try at the ledger: open it (acquiring the lease on a database); returns the
        open ledger once active, else how long to wait before the next try. A lease held by
        another is a wait (``standby``); so is an unreachable database after the first try."""
        lead, started = self.leadership, time.monotonic()
        try:
            journal = await self.ledger_thread.run(self.opener)
        except LeaseHeld as exc:
            if not self.standby:
                raise
            if (exc.holder, exc.token) != (lead.holder, lead.token):
                log.info("standby: the link is served by another controller", lease=str(exc))
            lead.waiting(exc)
            self.health.ok()
            return lead.poll_s(exc)
        except LedgerUnavailable as exc:
            if first or not self.standby:
                raise
            if lead.unreachable():
                log.warning("standby: the link ledger cannot be reached", error=str(exc))
            self.health.failed(str(exc))
            return lead.poll_s(None)
        # The term runs from the last renewal, which a long rebuild made after the acquire.
        lead.activated(lease_of(journal), getattr(journal, "lease_started", started))
        self.lost = asyncio.Event()
        self.health.ok()
        recovery = getattr(journal, "recovery", None)
        log.info(
            "active: this controller serves the link",
            token=lead.token,
            head_seq=journal.head.seq,
            rebuilt_s=None if recovery is None else round(recovery.seconds, 3),
        )
        return journal

    async def stand_by(
        self, stop: asyncio.Event, ping: Callable[[], object]
    ) -> LinkJournal | None:
        """Wait for the lease (connected to no broker, ``ping`` called as it polls: the
        watchdog); the open ledger once active, None when ``stop`` is set."""
        while True:
            taken = await self.take()
            if not isinstance(taken, float | int):
                return taken
            ping()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(taken):
                    await stop.wait()
            if stop.is_set():
                return None
