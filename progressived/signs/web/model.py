"""What the web sign shows, as a pure function of the MQTT messages it has read.

One :class:`Floor` holds every *source* a sign may show: a table
(``<prefix>/table/<id>/...``) or a link's linked meters (``<prefix>/link/<id>/meter/...``),
the kinds of :data:`~progressived.signs.web.look.SourceKind`. The rules follow docs/mqtt.md for
signs: a meter value with a lower ``seq`` than the one shown is ignored, until the source's
``online`` status carries a ``boot`` not seen before; events are read as the terminal sign
reads them (:mod:`progressived.signs.events`: checked, typed, recognised by their ledger
``seq`` so a redelivery is not shown twice, the last 4,096 remembered per source). No
clock and no I/O here: ``now`` is passed in (monotonic seconds), so the rules are tested
without a broker or a browser.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, assert_never

from progressived.core.money import UNITS_PER_CENT, display_cents
from progressived.core.wirejson import MAX_MESSAGE, WireError, loads_object
from progressived.link.core.messages import MAX_PAYLOAD
from progressived.mqtt.payloads import METER_STATES
from progressived.signs.events import Malformed, SeenEvents, Shows, SignEvent, read_event
from progressived.signs.web.look import SOURCE_KINDS

# Every list a publisher can grow is bounded: a flood from one account costs the sign a
# fixed amount of memory and work, never a real update (docs/sign.md, "Limits").
MAX_METERS = 8  # meters (levels) per source; a sign shows three
MAX_PENDING = 16  # pending awards per source
MAX_ENVY = 32  # envy lines per round (a table has at most 7 seats)
MAX_REASONS = 16  # closed reasons per source (a controller has a handful)
# table_closed reasons (docs/mqtt.md) in the sign's words; others are shown as they are.
_REASONS = {"operator": "closed by an operator"}


dollars = display_cents  # whole cents as the sign shows them: ``$1,234.56``


@dataclass
class Meter:
    """One meter as last shown: never replaced by a lower ``seq`` of the same boot."""

    meter: str
    cents: int = 0
    display: str = "----"
    state: str = "waiting"
    seq: int = -1
    boot: str = ""
    # The last message carried ``pending`` (docs/mqtt.md): the awards awaiting the supervisor
    # come from the meter, and an award_keyed no newer than it does not add one.
    lists_pending: bool = False
    order: tuple[int, int] = (-1, -1)  # a linked meter's (epoch, lseq)
    link: str = ""  # a table's meter held by this link (its payload's ``link``), else ""
    units: int | None = None  # a link's own meter: its exact units (docs/link.md)

    def as_json(self) -> dict[str, Any]:
        return {
            "meter": self.meter,
            "cents": self.cents,
            "display": self.display,
            "state": self.state,
            "seq": self.seq,
            "boot": self.boot,
            "link": self.link,
            "units": self.units,
        }


@dataclass
class Award:
    """A meter award: pending (keyed, awaiting the supervisor) or the winner banner."""

    meter: str
    seat: int
    hand: str
    cents: int
    round: int
    until: float = 0.0  # monotonic end of the banner
    table: str = ""  # the winning table, on a linked meter's banner (its own id otherwise)

    def as_json(self, now: float) -> dict[str, Any]:
        return {
            "meter": self.meter,
            "seat": self.seat,
            "hand": self.hand,
            "cents": self.cents,
            "display": dollars(self.cents),
            "round": self.round,
            "table": self.table,
            "remaining_ms": max(0, round((self.until - now) * 1000)),
        }


@dataclass
class Source:
    """One table (or, later, link): its status, meters, awards and this round's envy."""

    kind: str
    id: str
    status: str = "unknown"  # online / offline / unknown (no status heard yet)
    boot: str = ""
    meters: dict[str, Meter] = field(default_factory=dict)
    closed_reasons: set[str] = field(default_factory=set)
    closed_seq: int = -1  # seq of the last meter that listed the closures (events up to it are old)
    pending: list[Award] = field(default_factory=list)
    banner: Award | None = None
    envy_round: int = -1
    envy: list[dict[str, Any]] = field(default_factory=list)
    seen: SeenEvents = field(default_factory=SeenEvents)  # the last events shown, by seq
    last_hit: dict[str, dict[str, Any]] = field(default_factory=dict)  # per linked meter

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.id}"

    def why_closed(self) -> str:
        """Why the progressive is closed here, in words for the floor ("" when it is not)."""
        if self.status == "offline":
            return "controller offline"
        return "; ".join(_REASONS.get(r, r) for r in sorted(self.closed_reasons))

    def as_json(self, now: float) -> dict[str, Any]:
        banner = self.banner if self.banner is not None and self.banner.until > now else None
        return {
            "key": self.key,
            "kind": self.kind,
            "id": self.id,
            "status": self.status,
            "boot": self.boot,
            "closed_reason": self.why_closed(),
            "closed": sorted(self.closed_reasons),  # as the controller says them
            "meters": [self.meters[m].as_json() for m in sorted(self.meters)],
            "pending": [a.as_json(now) for a in self.pending],
            "banner": banner.as_json(now) if banner is not None else None,
            "envy_round": self.envy_round,
            "envy": list(self.envy),
        }


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


@dataclass
class Floor:
    """Every source the sign has heard of, updated one MQTT message at a time."""

    prefix: str = "progressive"
    banner_s: float = 30.0
    sources: dict[str, Source] = field(default_factory=dict)
    problem: str = ""  # why the last message was refused as malformed ("" if it was not)
    # The sources the sign may show ("table/<id>", "link/<id>"): named in its configuration
    # or a link's membership. Anything else is ignored before it is parsed, so an account
    # that writes under its own name (docs/mqtt.md's ACL pattern) can never add a table.
    # None: every source (the pure tests' floor).
    named: frozenset[str] | None = None

    def parse(self, topic: str) -> tuple[str, str, list[str]] | None:
        """``(kind, id, rest)`` of a topic under the prefix, or None if not a sign topic."""
        parts = topic.split("/")
        head = self.prefix.split("/")
        if parts[: len(head)] != head or len(parts) < len(head) + 3:
            return None
        kind, ident, rest = parts[len(head)], parts[len(head) + 1], parts[len(head) + 2 :]
        if kind not in SOURCE_KINDS or not ident:
            return None
        return kind, ident, rest

    def source(self, kind: str, ident: str) -> Source:
        key = f"{kind}/{ident}"
        if key not in self.sources:
            self.sources[key] = Source(kind, ident)
        return self.sources[key]

    def receive(self, topic: str, payload: bytes, now: float) -> str | None:
        """Take one message; returns the key of the source it changed, or None.

        Malformed payloads, unknown topics, late (lower ``seq``) meters and repeated events
        change nothing.
        """
        self.problem = ""
        where = self.parse(topic)
        if where is None:
            return None
        kind, ident, rest = where
        if self.named is not None and f"{kind}/{ident}" not in self.named:
            return None  # not a source this sign shows: not even parsed
        try:  # the bounds: docs/mqtt.md for a table's topics, docs/link.md for a link's
            data = loads_object(payload, max_bytes=MAX_PAYLOAD if kind == "link" else MAX_MESSAGE)
        except WireError as exc:  # too large, too deep, not UTF-8, not a JSON object
            self.problem = exc.words
            return None
        src = self.source(kind, ident)
        if kind == "link":
            if len(rest) == 2 and rest[0] == "meter" and rest[1]:
                return src.key if self._link_meter(src, rest[1], data, now) else None
            return None
        if rest == ["status"]:
            changed = self._status(src, data)
        elif len(rest) == 2 and rest[0] == "meter" and rest[1]:
            changed = self._meter(src, rest[1], data)
        elif rest == ["event"]:
            changed = self._event(src, data, now)
        else:
            return None
        return src.key if changed else None

    def _status(self, src: Source, data: dict[str, Any]) -> bool:
        status = data.get("status")
        if status not in ("online", "offline"):
            self.problem = f"status {status!r} is neither online nor offline"
            return False
        boot = data.get("boot")
        if status == "online" and isinstance(boot, str) and boot and boot != src.boot:
            # A new run of the controller: its seqs start again (docs/mqtt.md), and what we
            # knew of its closed reasons and pending awards comes back with its messages.
            src.boot = boot
            for meter in src.meters.values():
                meter.seq = -1
            src.closed_reasons.clear()
            src.closed_seq = -1
            src.pending.clear()
        src.status = str(status)
        return True

    def _meter(self, src: Source, meter_id: str, data: dict[str, Any]) -> bool:
        cents, seq = data.get("cents"), data.get("seq")
        if not isinstance(cents, int) or not isinstance(seq, int) or isinstance(seq, bool):
            self.problem = "a meter needs integer cents and seq"
            return False
        meter = self._meter_of(src, meter_id)
        if meter is None:
            return False
        if seq < meter.seq:
            return False  # older than the value already shown
        state = data.get("state")
        if state not in METER_STATES:
            self.problem = f"meter state {state!r} is not open, pending or closed"
            return False
        meter.seq, meter.cents, meter.boot = seq, cents, src.boot
        display = data.get("display")
        meter.display = display if isinstance(display, str) else dollars(cents)
        meter.state = str(state)
        link = data.get("link")
        meter.link = str(link.get("id", "")) if isinstance(link, dict) else ""
        pending = data.get("pending")
        meter.lists_pending = isinstance(pending, list)
        if isinstance(pending, list):
            # What awaits the supervisor on this meter now, for a sign that saw no award_keyed.
            src.pending = [a for a in src.pending if a.meter != meter_id] + [
                Award(
                    meter_id, _int(p.get("seat")), str(p.get("hand", "")), _int(p.get("cents")), -1
                )
                for p in pending
                if isinstance(p, dict)
            ][-MAX_PENDING:]
        closed = data.get("closed")
        if isinstance(closed, list):
            src.closed_reasons = {str(r) for r in closed[:MAX_REASONS]}
            src.closed_seq = max(src.closed_seq, seq)
        return True

    def _meter_of(self, src: Source, meter_id: str) -> Meter | None:
        """The source's meter ``meter_id``; None (refused) beyond MAX_METERS meters."""
        meter = src.meters.get(meter_id)
        if meter is None:
            if len(src.meters) >= MAX_METERS:
                self.problem = f"more than {MAX_METERS} meters on one source"
                return None
            meter = src.meters[meter_id] = Meter(meter_id)
        return meter

    def _link_meter(self, src: Source, meter_id: str, data: dict[str, Any], now: float) -> bool:
        """A linked meter (docs/link.md): ordered by ``(epoch, lseq)``, never an older one;
        a new ``hit`` puts up the winning table's banner."""
        units, epoch, lseq = data.get("units"), data.get("epoch"), data.get("lseq")
        if type(units) is not int or type(epoch) is not int or type(lseq) is not int:
            self.problem = "a linked meter needs integer units, epoch and lseq"
            return False
        meter = self._meter_of(src, meter_id)
        if meter is None:
            return False
        if (epoch, lseq) <= meter.order:
            return False  # older than (or the same as) the value already shown
        first = meter.order == (-1, -1)  # a sign just started: the retained value
        meter.order, meter.seq = (epoch, lseq), lseq
        meter.cents, meter.units = units // UNITS_PER_CENT, units
        meter.display, meter.state = dollars(meter.cents), "open"
        src.status = "online"
        hit = data.get("hit")
        if isinstance(hit, dict) and hit != src.last_hit.get(meter_id):
            src.last_hit[meter_id] = hit
            if not first:  # a sign that just started does not announce an old hit
                src.banner = Award(
                    meter_id,
                    _int(hit.get("seat")),
                    str(hit.get("hand", "")),
                    _int(hit.get("units")) // UNITS_PER_CENT,
                    -1,
                    now + self.banner_s,
                    str(hit.get("table", "")),
                )
        return True

    def _event(self, src: Source, data: dict[str, Any], now: float) -> bool:
        """An event, read by :func:`progressived.signs.events.read_event` (the terminal sign
        reads them so too): what it changes is decided from its type, :class:`Shows`."""
        try:
            event = read_event(data, src.id)
        except Malformed as exc:
            self.problem = str(exc)
            return False
        if event is None or not src.seen.first(event.seq):
            return False  # a kind a sign does not show, or a redelivery of one shown
        if event.shows in (Shows.CLOSED, Shows.OPENED) and event.seq <= src.closed_seq:
            return False  # a meter as new or newer already listed the closures
        award = Award(event.meter, event.seat, event.hand, event.cents, event.round)
        others = [a for a in src.pending if (a.meter, a.seat, a.hand) != event.award]
        shown = src.meters.get(award.meter)
        match event.shows:
            case Shows.PENDING:
                if shown is not None and shown.lists_pending and shown.seq >= event.seq:
                    return False  # the meter, newer, already says what awaits the supervisor
                src.pending = [*others, award][-MAX_PENDING:]
            case Shows.WINNER:
                src.pending = others
                award.until = now + self.banner_s
                src.banner = award
            case Shows.APPROVED | Shows.REJECTED | Shows.UNKEYED | Shows.REVERSED:
                src.pending = others  # approved (split): no longer awaits the supervisor
            case Shows.NEXT_ROUND:
                if event.round != src.envy_round:
                    src.envy_round, src.envy = event.round, []
                if src.banner is not None and event.round != src.banner.round:
                    # The winning table's next round: the last round's winner goes at once,
                    # as on the terminal sign (never announced during the next round).
                    src.banner = None
            case Shows.ENVY:
                return self._envy(src, event)
            case Shows.CLOSED:
                if len(src.closed_reasons) >= MAX_REASONS:
                    self.problem = f"more than {MAX_REASONS} closed reasons"
                    return False
                src.closed_reasons.add(event.reason)
            case Shows.OPENED:
                src.closed_reasons.discard(event.reason)
            case _:
                assert_never(event.shows)
        return True

    def _envy(self, src: Source, event: SignEvent) -> bool:
        if event.round != src.envy_round:
            src.envy_round, src.envy = event.round, []
        if len(src.envy) >= MAX_ENVY:
            self.problem = f"more than {MAX_ENVY} envy bonuses in one round"
            return False
        src.envy.append(
            {
                "seat": event.seat,
                "from_seat": event.from_seat,
                "hand": event.hand,
                "cents": event.cents,
                "display": dollars(event.cents),
            }
        )
        return True

    def snapshot(self, now: float) -> list[dict[str, Any]]:
        return [self.sources[k].as_json(now) for k in sorted(self.sources)]
