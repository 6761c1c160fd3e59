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
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from typing import TYPE_CHECKING

import structlog

from progressived.ledger import Fenced, LeaseHeld, LedgerUnavailable
from progressived.link.runtime.leadership import lease_of

if TYPE_CHECKING:
    from progressived.link.runtime.controller import LinkController

log = structlog.get_logger("progressived.link")
FENCED_EXIT = 5  # the ledger is another controller's now (docs/operations.md: exit 5)


def lose(c: LinkController, why: str) -> None:
    """This controller no longer holds the link's lease: stop serving at once (the
    broker sessions dropped, nothing more journaled) and stand by, or (``standby``
    off) stop with status 5 (docs/link.md)."""
    if c.lost.is_set():
        return
    c.leadership.stood_down()
    then = "standing by" if c.standby else "stopping"
    log.error(f"link ledger lease lost: {then}", why=why)
    c.lost.set()
    if not c.standby:
        c.lifecycle.fail(FENCED_EXIT)


async def hold_lease(c: LinkController) -> None:
    """Renew the lease (thrice a term; each commit extends it too) while it is held:
    a renewal refused by the fence, or none for a whole term, loses it. A database out
    of reach is logged once; the commits that fail meanwhile say the rest."""
    lead = c.leadership
    while True:
        await asyncio.sleep(lead.renew_every_s(c.config.heartbeat_s))
        started = time.monotonic()
        try:
            left = lead.term_left_s()
            async with asyncio.timeout(None if left == math.inf else max(0.0, left)):
                await c.db(c.ledger.renew)
        except Fenced as exc:
            lose(c, f"the lease was refused on renewal: {exc}")
            return
        except LedgerUnavailable as exc:
            if not c.lease_unrenewed:
                log.warning("link ledger lease not renewed", error=str(exc))
            c.lease_unrenewed = True
        except TimeoutError:
            pass  # the term ended while the renewal was on its way: see below
        else:
            c.lease_unrenewed = False
            lead.extended(started, lease_of(c.journal))
        if not lead.holds():
            lose(c, f"the lease was not renewed for its whole term ({lead.lease_s} s)")
            return


async def take_lease(c: LinkController, *, first: bool = False) -> float:
    """One try at the ledger: open it (acquiring the lease on a database); returns 0
    once active, else how long to wait before the next try. A lease held by another is
    a wait (``standby``); so is an unreachable database after the first try."""
    started = time.monotonic()
    try:
        journal = await c.db(c.opener)
    except LeaseHeld as exc:
        if not c.standby:
            raise
        if (exc.holder, exc.token) != (c.leadership.holder, c.leadership.token):
            log.info("standby: the link is served by another controller", lease=str(exc))
        c.leadership.waiting(exc)
        c.unreachable_logged, c.ledger_error = False, None
        return c.leadership.poll_s(exc)
    except LedgerUnavailable as exc:
        if first or not c.standby:
            raise
        if not c.unreachable_logged:
            log.warning("standby: the link ledger cannot be reached", error=str(exc))
        c.unreachable_logged, c.ledger_error = True, str(exc)
        c.leadership.waiting(None)
        return c.leadership.poll_s(None)
    c.journal = journal
    # The term runs from the last renewal, which a long rebuild made after the acquire.
    c.leadership.activated(lease_of(journal), getattr(journal, "lease_started", started))
    c.lost = asyncio.Event()
    c.ledger_error = None
    c.unreachable_logged = c.lease_unrenewed = False  # a later outage is news again
    recovery = getattr(journal, "recovery", None)
    log.info(
        "active: this controller serves the link",
        token=c.leadership.token,
        head_seq=journal.head.seq,
        rebuilt_s=None if recovery is None else round(recovery.seconds, 3),
    )
    return 0.0


async def stand_by(c: LinkController) -> bool:
    """Wait for the lease (connected to no broker, the watchdog pinged as it polls);
    True once active, False when asked to stop."""
    while c.journal is None:
        wait = await take_lease(c)
        if c.journal is not None:
            return True
        c.loop_beat = time.monotonic()
        c.notifier.watchdog()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await c.stop_requested.wait()
        if c.stop_requested.is_set():
            return False
    return True
