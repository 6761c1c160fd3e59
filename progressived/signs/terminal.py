"""A terminal meter sign: subscribes as a real sign would and draws the meter in big digits.

The view (:class:`SignView`) is pure — messages in, text out — so it is tested without a
terminal; :func:`run_sign` is the MQTT loop around it. A sign shows one table's meter and
subscribes to that table's topics only; a new ``boot`` in the table's ``online`` status
restarts its ``seq`` expectation (docs/mqtt.md).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TextIO, assert_never

import aiomqtt

from progressived.core.money import display_cents
from progressived.core.wirejson import MAX_MESSAGE, WireError, loads_object
from progressived.mqtt.client import Ending
from progressived.mqtt.payloads import (
    event_topic,
    meter_problem,
    meter_topic,
    status_topic,
)
from progressived.mqtt.session import MqttSession
from progressived.signs.broker import EXIT_NOT_AUTHORISED, BrokerLogin, NotAuthorised
from progressived.signs.events import (
    IgnoredLog,
    Malformed,
    SeenEvents,
    Shows,
    SignEvent,
    read_event,
)
from progressived.signs.screen import redraw
from progressived.signs.web.words import Closure, closure


class View(Protocol):
    """What :func:`run_sign` draws: a table's meter (:class:`SignView`) or a linked one
    (:class:`progressived.signs.link.LinkSignView`)."""

    state: str
    waiting_for: str
    tables: dict[str, str]
    problem: str  # why the last message was ignored as malformed ("" if it was not)
    broker_down: bool  # the sign's own broker connection is lost (not the table's status)

    @property
    def meter_topic(self) -> str: ...
    def topics(self) -> tuple[str, ...]: ...
    def receive(self, topic: str, payload: bytes, now: float | None = None) -> bool: ...
    def render(self, now: float | None = None) -> str: ...
    def plain(self) -> str: ...

_FONT: dict[str, tuple[str, ...]] = {
    "0": (" ### ", "#   #", "#   #", "#   #", " ### "),
    "1": ("  #  ", " ##  ", "  #  ", "  #  ", " ### "),
    "2": (" ### ", "#   #", "  ## ", " #   ", "#####"),
    "3": ("#### ", "    #", " ### ", "    #", "#### "),
    "4": ("#   #", "#   #", "#####", "    #", "    #"),
    "5": ("#####", "#    ", "#### ", "    #", "#### "),
    "6": (" ### ", "#    ", "#### ", "#   #", " ### "),
    "7": ("#####", "    #", "   # ", "  #  ", "  #  "),
    "8": (" ### ", "#   #", " ### ", "#   #", " ### "),
    "9": (" ### ", "#   #", " ####", "    #", " ### "),
    "$": (" ####", "# #  ", " ### ", "  # #", "#### "),
    ",": ("   ", "   ", "   ", " # ", "#  "),
    ".": ("  ", "  ", "  ", "  ", "# "),
    "-": ("     ", "     ", "#####", "     ", "     "),
}


# The banner each award event puts up (docs/mqtt.md, "What a sign shows").
_BANNERS = {
    Shows.PENDING: "PENDING",  # awaits the supervisor
    Shows.APPROVED: "APPROVED",  # split: approved, paid (and final) at RECONCILE
    Shows.WINNER: "WINNER",  # paid
}


dollars = display_cents  # whole cents as signs show money: ``$1,234.56``


def big(text: str) -> str:
    """``text`` in five-row block letters (digits, $, comma, point)."""
    rows = ["", "", "", "", ""]
    for char in text:
        glyph = _FONT.get(char, ("   ",) * 5)
        for index in range(5):
            rows[index] += glyph[index] + " "
    return "\n".join(row.rstrip() for row in rows)


@dataclass
class SignView:
    """What one sign shows for one meter, updated from MQTT messages.

    A winner banner stays 30 s, or until the winning table locks its next round, so a sign
    never announces the last round's winner during the next one.
    """

    prefix: str
    meter_id: str
    table_id: str
    display: str = "----"
    state: str = "waiting"
    seq: int = -1
    tables: dict[str, str] = field(default_factory=dict)
    banner: str = ""
    banner_shows: Shows | None = None  # the event behind the banner (its type, not its text)
    banner_until: float = 0.0
    banner_table: str = ""
    seen_events: SeenEvents = field(default_factory=SeenEvents)  # bounded: the last 4,096
    boot: str = ""  # the controller run whose meter seqs this view follows
    waiting_for: str = ""  # what "waiting" means: the broker and topic, said on screen
    closed: tuple[str, ...] = ()  # why the meter is closed (its ``closed``), shown with CLOSED
    closures: frozenset[Closure] = frozenset()  # the same as types, decided on
    problem: str = ""  # why the last message was ignored as malformed ("" if it was not)
    broker_down: bool = False  # this sign lost its broker: the value may be old, not closed

    @property
    def meter_topic(self) -> str:
        return meter_topic(self.prefix, self.table_id, self.meter_id)

    def topics(self) -> tuple[str, ...]:
        """Status first: a new boot restarts the seq expectation."""
        return (
            status_topic(self.prefix, self.table_id),
            self.meter_topic,
            event_topic(self.prefix, self.table_id),
        )

    def receive(self, topic: str, payload: bytes, now: float | None = None) -> bool:
        """Take one message; returns whether the view changed. Bad payloads are ignored."""
        now = time.monotonic() if now is None else now
        self.problem = ""
        try:
            data = loads_object(payload, max_bytes=MAX_MESSAGE)
        except WireError as exc:  # too large, too deep, not UTF-8, not a JSON object
            self.problem = exc.words
            return False
        parts = topic.split("/")
        if topic == self.meter_topic:
            if problem := meter_problem(data, self.table_id, self.meter_id):
                self.problem = problem
                return False  # malformed (docs/mqtt.md): the last good value stays
            if data["seq"] < self.seq:
                return False  # an older value delivered late
            self.seq, self.display, self.state = data["seq"], data["display"], data["state"]
            reasons = data.get("closed")
            self.closed = tuple(str(r) for r in reasons) if isinstance(reasons, list) else ()
            self.closures = frozenset(closure(r) for r in self.closed)
            if self.state == "closed" and Closure.WAITING_FOR_LINK in self.closures:
                self.display = "----"  # a linked meter with no value yet: never $0.00
            return True
        if topic == status_topic(self.prefix, self.table_id):
            self.tables[parts[-2]] = str(data.get("status", "?"))
            boot = data.get("boot")
            if data.get("status") == "online" and isinstance(boot, str) and boot != self.boot:
                # A new run of the controller: its seqs start again, and a stale or forged
                # high seq retained from before must not freeze the sign.
                self.boot = boot
                self.seq = -1
            return True
        if topic == event_topic(self.prefix, self.table_id):
            try:
                event = read_event(data, self.table_id)
            except Malformed as exc:
                self.problem = str(exc)
                return False  # malformed (docs/mqtt.md): changes nothing
            if event is None or not self.seen_events.first(event.seq):
                return False  # a kind a sign does not show, or a repeat after a reconnect
            return self._show(event, now)
        return False

    def _show(self, event: SignEvent, now: float) -> bool:
        """The banner an event puts up or takes down, decided from its type alone."""
        shows = event.shows
        if shows is Shows.NEXT_ROUND:
            if not self.banner or event.table != self.banner_table:
                return False
            self._clear_banner()  # that table's next round has begun
            return True
        if event.meter != self.meter_id:
            return False
        match shows:
            case Shows.PENDING | Shows.APPROVED | Shows.WINNER:
                # WINNER only once the award is paid (award_confirmed): a keyed award may
                # still be rejected or turned off, and under split an approved one repriced.
                self.banner = (
                    f"*** {_BANNERS[shows]}: table {event.table} seat {event.seat} "
                    f"{event.hand} {dollars(event.cents)} ***"
                )
                self._banner_for(shows, event.table, now + 30.0)
            case Shows.UNKEYED | Shows.REVERSED:
                if self.banner_shows is not Shows.PENDING:
                    return False
                self._clear_banner()  # the award awaits no one any more
            case Shows.REJECTED:
                self.banner = f"award at table {event.table} seat {event.seat} rejected"
                self._banner_for(shows, event.table, now + 10.0)
            case Shows.ENVY | Shows.CLOSED | Shows.OPENED | Shows.NEXT_ROUND:
                return False  # the meter says the closures; envy is the web sign's
            case _:
                assert_never(shows)
        return True

    def _banner_for(self, shows: Shows, table: str, until: float) -> None:
        self.banner_shows, self.banner_table, self.banner_until = shows, table, until

    def _clear_banner(self) -> None:
        self.banner, self.banner_shows, self.banner_until = "", None, 0.0

    @property
    def offline(self) -> bool:
        return bool(self.tables) and all(v != "online" for v in self.tables.values())

    def status_line(self) -> str:
        if self.broker_down:  # the sign's connection, not the table: say so, never OFFLINE
            return "NOT LIVE: this sign lost its broker (last value shown)"
        if self.offline:
            return "OFFLINE"
        waiting = f"waiting for {self.waiting_for}" if self.waiting_for else "waiting..."
        if self.state == "closed" and self.closures == {Closure.WAITING_FOR_LINK}:
            return "WAITING FOR THE LINK"
        if self.state == "closed" and self.closed:
            return f"CLOSED: {', '.join(self.closed)}"
        return {"pending": "PENDING", "closed": "CLOSED", "open": "", "waiting": waiting}.get(
            self.state, self.state.upper()
        )

    def render(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        lines = [f"progressive {self.meter_id}", "", big(self.display), ""]
        status = self.status_line()
        if status:
            lines.append(f"[ {status} ]")
        if self.banner and now < self.banner_until:
            lines.append(self.banner)
        tables = ", ".join(f"{t}: {s}" for t, s in sorted(self.tables.items()))
        if tables:
            lines.append(f"tables - {tables}")
        return "\n".join(lines)

    def plain(self) -> str:
        """One line per update, for logs and tests."""
        status = self.status_line() or "OPEN"
        banner = f" {self.banner}" if self.banner else ""
        return f"{self.meter_id} {self.display} {status}{banner}"


class _SignNotices:
    """The session's news as a sign says it: one stderr line each, the screen redrawn."""

    def __init__(
        self, login: BrokerLogin, view: View, notice: Callable[[str], None], source: str
    ) -> None:
        self.login, self.view, self.notice, self.source = login, view, notice, source
        self.redraw: Callable[[], None] = lambda: None
        self.unreachable = ""  # the reason said for the current outage ("" when connected)

    def connected(self, session: MqttSession) -> None:
        self.unreachable = ""
        if self.view.broker_down:
            self.view.broker_down = False
            self.redraw()
        if self.view.state == "waiting":
            self.notice(f"connected; waiting for {self.view.waiting_for}")
            self.redraw()

    def disconnected(self, session: MqttSession, retry_in_s: float | None) -> None:
        url = self.login.url
        if retry_in_s is None:  # refused: retrying cannot help
            if session.ending is Ending.SUBSCRIPTION_REFUSED:
                self.notice(f"broker {url} refused this sign: {session.detail} (check the ACL)")
            else:
                who = (
                    f"user {self.login.username!r}" if self.login.username else "an anonymous sign"
                )
                self.notice(
                    f"broker {url} refused the login of {who}: not authorised "
                    f"({session.detail}; check --username and the password)"
                )
            return
        if session.detail != self.unreachable:
            self.unreachable = session.detail
            o = session.options
            self.notice(
                f"broker {url} unreachable ({session.detail}); retrying "
                f"(every {o.reconnect_initial_s:g}s, backing off to {o.reconnect_max_s:g}s)"
            )
        # A typed state, not a table status: the table may well be online; only this sign
        # cannot tell (a table marked "broker unreachable" read as OFFLINE before).
        self.view.broker_down = True
        self.redraw()

    def denied(self, session: MqttSession, topic: str, reason: str, first: bool) -> None:
        return None  # a sign publishes nothing

    def accepted(self, session: MqttSession, topic: str) -> None:
        return None

    def downgraded(self, session: MqttSession) -> None:
        return None


async def run_sign(
    login: BrokerLogin,
    prefix: str,
    table_id: str,
    meter_id: str,
    *,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    plain: bool = False,
    count: int | None = None,
    reconnect_s: float = 1.0,
    view: View | None = None,
) -> int:
    """Subscribe to one table's meter (or ``view``'s: a linked meter) and draw until
    interrupted (or after ``count`` updates).

    An unreachable broker is retried (from ``reconnect_s``, backing off); a refused login
    or subscription is reported in one line and returns ``EXIT_NOT_AUTHORISED`` (retrying
    cannot help).
    """
    if view is None:
        view = SignView(prefix, meter_id, table_id)
    view.waiting_for = f"a controller to publish {view.meter_topic} on {login.url}"
    sign_view = view
    updates = 0
    ignored = IgnoredLog(lambda line: print(line, file=err, flush=True))

    def notice(line: str) -> None:
        err.write(f"sign: {line}\n")
        err.flush()

    def draw() -> None:
        if plain:
            out.write(sign_view.plain() + "\n")
        else:
            out.write(redraw(sign_view.render(), out))
        out.flush()

    notices = _SignNotices(login, view, notice, table_id or "link")
    if not plain:
        notices.redraw = draw
    session = MqttSession(
        login.options(reconnect_s=reconnect_s), observers=[notices], give_up_refused=True
    )

    async def take(message: aiomqtt.Message) -> None:
        nonlocal updates
        payload = message.payload
        if not isinstance(payload, (bytes, bytearray)):
            return
        if not sign_view.receive(str(message.topic), bytes(payload)):
            if sign_view.problem:
                ignored.ignored(str(message.topic), sign_view.problem)
            return
        updates += 1
        draw()
        if count is not None and updates >= count:
            await session.stop()

    for topic in view.topics():
        session.subscribe(topic, take)
    try:
        await session.run()
    except NotAuthorised:
        return EXIT_NOT_AUTHORISED
    return 0
