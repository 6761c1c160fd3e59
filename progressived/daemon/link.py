"""The table's link adapter: the link outbox sent in order, results journaled, heartbeats.

The table's one MQTT session (:class:`~progressived.mqtt.session.MqttSession`, shared with
the sign publisher: the ``[mqtt]`` broker, user name and client id the table id) subscribes
to the link's messages for this table (``<prefix>/link/<link>/to/<table>``) and to the
linked meters (``<prefix>/link/<link>/meter/<meter>``, retained). Every message in the link outbox
(:mod:`progressived.daemon.link_out`, rows of the table ledger) is published in sequence
order at QoS 1 and sent again after a ``resend`` result, after a heartbeat whose
``expect`` shows the link has not got the oldest unanswered one, or after ``resend_s``
without an answer. The broker's PUBACK deletes nothing: a final result is journaled
(``link_result``, the link's head witnessed) in the transaction that deletes the outbox
row and, for a claim or a confirmation, answers the round. A repeated result finds no
outbox row and is ignored.

After ``missed_heartbeats`` heartbeats missed in a row the table closes its linked meters
(``SetClosed`` reason ``link-down``); the next heartbeat reopens them. Messages wait in
the outbox meanwhile and drain when the link answers again. A refusal resending cannot
cure (:mod:`progressived.daemon.link_refusal`) closes them too (``link refused: CODE``),
until an operator opens the table again.

Each linked meter is named by the link's id for it (``link_meter``) in every message and
topic, and by the table's id in the table's events, ledger and signs.

:meth:`LinkClient.status` is what ``progressivectl status`` and the metrics show: up or
down and since when, the broker connection, the outbox's depth and its oldest message's
age (from the message's ``at``), resends, and the linked meters as the link published them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from datetime import datetime

import aiomqtt
import structlog

from progressived.config.daemon import DaemonConfig, LinkSection
from progressived.daemon.journal import Journal
from progressived.daemon.link_out import LinkOutbox, result_record
from progressived.daemon.link_refusal import RefusalLog, closes, closure_reason, refused_code
from progressived.daemon.port import LinkedMeterView, LinkStatus
from progressived.engine import SetClosed
from progressived.engine.meter_port import MeterAnswered
from progressived.engine.state import LINK_DOWN, TableState, link_closures
from progressived.ledger.errors import LedgerError
from progressived.ledger.link_outbox import DropLinkMessage, LinkOutboxChange
from progressived.ledger.rows import Record
from progressived.link.core import messages as lm
from progressived.mqtt.session import MqttSession
from progressived.runtime.ratelimit import RateLimitedLog

log = structlog.get_logger("progressived")

UNREADABLE_LOG_EVERY_S = 60.0  # one line per unreadable message code and minute


def _sent_at(payload: object) -> float | None:
    """The ``at`` of an outbox message (the table's time when it was made), as a POSIX time."""
    try:
        at = json.loads(str(payload))["at"]
        return datetime.fromisoformat(str(at)).timestamp()
    except (ValueError, KeyError, TypeError):
        return None


class LinkClient:
    """The link's side of one table daemon (built by :mod:`progressived.daemon.service`)."""

    def __init__(
        self,
        *,
        journal: Journal,
        config: DaemonConfig,
        link: LinkSection,
        session: MqttSession,
        outbox: LinkOutbox,
        queued: asyncio.Event,
        meters: dict[str, lm.LinkedMeter],
        changed: Callable[[], None],
    ) -> None:
        """``outbox``, ``queued`` (set by the journal after a decision queued messages) and
        ``meters`` (the link's latest value per linked meter, which the outputs draw) are
        made before the journal and shared with it and the outputs; ``changed`` redraws."""
        self.journal = journal
        self.session = session
        self.config = config
        self.link = link
        params, prefix = config.params, config.mqtt.prefix
        self.outbox = outbox
        self.to_topic = lm.to_table_topic(prefix, link.id, params.table_id)
        self.at_link = params.link_meter_ids()  # table meter id -> the link's id for it
        self.meter_topics = {  # the link's meter topic -> the table's meter id
            lm.meter_topic(prefix, link.id, at): m for m, at in sorted(self.at_link.items())
        }
        self.meters = meters  # the link's latest view per meter
        self.last_heartbeat = time.monotonic()
        self.heard = False  # a heartbeat since the daemon started
        self.up = False  # heartbeats arriving
        self.since = journal.clock()  # when ``up`` last changed (the start until then)
        self.depth = 0  # messages in the link outbox
        self.oldest_at: float | None = None  # the oldest outbox message's ``at`` (POSIX)
        self.sent_upto = 0  # the highest sequence published on this connection
        self.sent_at: dict[int, float] = {}
        self.resends = 0
        self.refused_code = ""  # the last non-final refusal's code ("" when none)
        self.refusals = RefusalLog(link.id, self.at_link)  # error lines, the link's words
        self.unreadable: dict[str, int] = {}  # messages on the link's topics ignored, by code
        self._unreadable_log = RateLimitedLog(1, UNREADABLE_LOG_EVERY_S, logger=log)  # per code
        self._wake = queued
        self.changed = changed  # the outputs redraw (the linked meter's value)
        session.subscribe(self.to_topic, self._message)
        for topic in self.meter_topics:
            session.subscribe(topic, self._message)
        session.on_connect(self._connected)
        session.while_connected(self._sender)

    @property
    def connected(self) -> bool:
        return self.session.connected

    # ------------------------------------------------------------- start
    async def load(self) -> None:
        """Rebuild sequences and claim ids from the ledger (after the journal opened it)."""
        j = self.journal
        self.outbox.load(await j.link_sent_since(j.state.round))
        await self.refresh()
        log.info("link", link=self.link.id, next_seq=self.outbox.next_seq, outbox=self.depth)

    def wake(self) -> None:
        self._wake.set()

    async def refresh(self) -> None:
        """Re-read the outbox's depth and its oldest message (the sender does it as it goes;
        this is for when it is not running: no broker)."""
        waiting = await self.journal.link_outbox_depth()
        self.depth = waiting.depth
        oldest = waiting.oldest_payload
        self.oldest_at = _sent_at(oldest) if oldest is not None else None

    def _set_up(self, up: bool) -> None:
        if up != self.up:
            self.up = up
            self.since = self.journal.clock()

    def status(self) -> LinkStatus:
        """The link as this table sees it (read on the event loop or the metrics thread:
        every field is one reference, read once)."""
        now = time.monotonic()
        oldest = self.oldest_at
        meters = []
        for meter_id in sorted(self.meter_topics.values()):
            seen, at_link = self.meters.get(meter_id), self.at_link[meter_id]
            if seen is None:
                meters.append(LinkedMeterView(meter_id, None, 0, 0, at_link))
            else:
                meters.append(LinkedMeterView(meter_id, seen.units, seen.epoch, seen.lseq, at_link))
        closed = self.journal.state.closed
        code = refused_code(closed)
        return LinkStatus(
            link_id=self.link.id,
            up=self.up,
            since=self.since,
            heard=self.heard,
            heartbeat_age_s=max(0.0, now - self.last_heartbeat),
            broker_connected=self.connected,
            outbox_depth=self.depth,
            outbox_oldest_s=(
                max(0.0, time.time() - oldest) if self.depth and oldest is not None else None
            ),
            resends=self.resends,
            meters=tuple(meters),
            closed=bool(link_closures(closed)),
            refused=code,
            refused_reason=self.refusals.reasons.get(code, "") if code is not None else "",
            unreadable=tuple(sorted(self.unreadable.items())),
        )

    # ------------------------------------------------------------- run
    async def run(self) -> None:
        """Watch the heartbeats (the session, run by the daemon, carries the messages)."""
        await self._watch()

    async def _connected(self) -> None:
        self.sent_upto = 0  # a new connection: everything unanswered goes again

    async def _message(self, message: aiomqtt.Message) -> None:
        await self._received(str(message.topic), bytes(message.payload or b""))

    async def _sender(self) -> None:
        j = self.journal
        while True:
            self._wake.clear()
            rows = await j.link_outbox()
            self.depth = len(rows)
            self.oldest_at = _sent_at(rows[0].payload) if rows else None
            now = time.monotonic()
            if rows:
                oldest = rows[0].seq
                sent = self.sent_at.get(oldest)
                if sent is not None and now - sent >= self.link.resend_s:
                    self._resend_from(oldest, "no answer")
            for row in rows:
                if row.seq <= self.sent_upto:
                    continue
                # A refused publish (the ACL) is counted and logged by the session; the
                # message stays in the outbox and goes again after resend_s.
                await self.session.publish(row.topic, row.payload.encode())
                self.sent_upto = row.seq
                self.sent_at[row.seq] = time.monotonic()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(self.link.resend_s, self.link.heartbeat_s) / 2):
                    await self._wake.wait()

    def _resend_from(self, seq: int, why: str) -> None:
        if self.sent_upto >= seq:
            log.info("link: sending again", seq=seq, why=why)
            self.resends += 1
            self.sent_upto = seq - 1
            self.wake()

    async def _watch(self) -> None:
        """Close the linked meters after the missed heartbeats; the heartbeat reopens them."""
        limit = self.link.missed_heartbeats * self.link.heartbeat_s
        while True:
            await asyncio.sleep(self.link.heartbeat_s / 4)
            if not self.connected:  # the sender is not there to keep the depth current
                with contextlib.suppress(LedgerError):
                    await self.refresh()
            silent = time.monotonic() - self.last_heartbeat
            if silent > limit:
                self._set_up(False)
            if silent > limit and LINK_DOWN not in self.journal.state.closed:
                log.warning("link down: the linked meters close", link=self.link.id)
                await self._set_closed(True)

    async def _set_closed(self, closed: bool) -> None:
        j = self.journal
        await j.submit(SetClosed(reason=LINK_DOWN, closed=closed, at=j.clock(), actor="system"))

    # ------------------------------------------------------------- messages in
    async def _received(self, topic: str, payload: bytes) -> None:
        try:
            message = lm.decode_link(payload)
        except lm.MessageError as exc:
            self._ignore_unreadable(topic, exc)
            return
        if topic in self.meter_topics:
            if isinstance(message, lm.LinkedMeter):
                self._meter(self.meter_topics[topic], message)
            return
        if getattr(message, "table", None) != self.config.params.table_id or (
            getattr(message, "link", None) != self.link.id
        ):
            log.warning("link: a message for another table or link ignored", topic=topic)
            return
        if isinstance(message, lm.Heartbeat):
            await self._heartbeat(message)
        elif isinstance(message, lm.Result):
            await self._result(message)
        elif isinstance(message, lm.AwardUpdate):
            log.info("link: award update", claim=message.award.claim, units=message.award.units)

    def _ignore_unreadable(self, topic: str, exc: lm.MessageError) -> None:
        """A message on the link's topics that is not the protocol's (too large, too deep,
        not JSON, a bad field, ...): counted by code, logged at most once a minute per code,
        and nothing else happens (docs/link.md, "Table side")."""
        count = self.unreadable[exc.code] = self.unreadable.get(exc.code, 0) + 1
        self._unreadable_log.warning(
            "link: unreadable message ignored",
            per=exc.code,
            topic=topic,
            code=exc.code,
            reason=exc.reason,
            count=count,
        )

    def _meter(self, meter_id: str, meter: lm.LinkedMeter) -> None:
        """The link's meter ``meter`` arrived on the topic of the table's ``meter_id``."""
        if meter.link != self.link.id or meter.meter != self.at_link[meter_id]:
            log.warning("link: a meter for another link or meter ignored", meter=meter.meter)
            return
        known = self.meters.get(meter_id)
        if known is not None and (meter.epoch, meter.lseq) <= (known.epoch, known.lseq):
            return  # never older than what the sign showed
        self.meters[meter_id] = meter
        self.changed()

    async def _heartbeat(self, beat: lm.Heartbeat) -> None:
        self.last_heartbeat = time.monotonic()
        self.heard = True
        self._set_up(True)
        if LINK_DOWN in self.journal.state.closed:
            log.info("link back: the linked meters reopen", link=self.link.id)
            await self._set_closed(False)
        sent = self.sent_at.get(beat.expect)
        late = sent is not None and time.monotonic() - sent >= self.link.heartbeat_s / 2
        if self.depth and late:
            self._resend_from(beat.expect, "heartbeat expects it")

    async def _result(self, result: lm.Result) -> None:
        if result.status == "resend":
            log.debug("link: resend", resend_from=result.resend_from)
            self._resend_from(max(1, result.resend_from), "the link asked")
            return
        if result.status == "refused" and result.lseq == 0:
            # Not final: the link refused the message without consuming its sequence
            # (conflict, head-regressed, too-old, unknown-table, forged, a payload it could
            # not read). The message stays in the outbox (the link keeps expecting that
            # sequence), nothing is journaled as its answer. When resending it cannot help
            # (the table is not a member; the two ledgers disagree: an incident for
            # `progressivectl link reconcile`), the linked progressive closes.
            self.refused_code = result.code
            if closes(result.code, final=False) and await self._in_outbox(result):
                self.refusals.say(result, closing=True)
                await self._close_refused(result)
            else:
                self.refusals.say(result, closing=False)
            return
        closing = result.status == "refused" and closes(result.code, final=True)
        close = closure_reason(result.code) if closing else None
        if await self.journal.link_result(lambda state, at: self._build(result, state, at, close)):
            if closing:
                self.refusals.say(result, closing=True)
            self.sent_at.pop(result.seq, None)
            self.depth = max(0, self.depth - 1)
            self.wake()

    async def _build(
        self, result: lm.Result, state: TableState, at: str, close: str | None = None
    ) -> tuple[MeterAnswered | None, list[Record], list[LinkOutboxChange], str | None] | None:
        waiting = await self.journal.link_message(result.seq)
        if waiting is None or waiting.id != result.id:
            log.debug("link: repeated result ignored", seq=result.seq)
            return None
        message = json.loads(waiting.payload)
        answer = self.outbox.answer(state, message, result, at)
        record = result_record(self.link.id, result, str(message["type"]), at)
        if refused_code(state.closed) is not None:
            close = None  # closed by a refusal already: the first one's code stays shown
        return answer, [record], [DropLinkMessage(result.seq)], close

    # ------------------------------------------------------------- refusals
    async def _in_outbox(self, result: lm.Result) -> bool:
        """Whether ``result`` answers a message this table is still waiting on (a refusal
        of something it never sent, or already journaled, changes nothing)."""
        waiting = await self.journal.link_message(result.seq)
        return waiting is not None and waiting.id == result.id

    async def _close_refused(self, result: lm.Result) -> None:
        """Close the linked progressive for a refusal that consumed nothing (journaled)."""
        j = self.journal
        if refused_code(j.state.closed) is None:
            reason = closure_reason(result.code)
            await j.submit(SetClosed(reason=reason, closed=True, at=j.clock(), actor="link"))
