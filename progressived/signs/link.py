"""The terminal sign following a link: the linked meter and its last hit (docs/link.md).

A linked meter is published by the link controller alone, retained, on
``<prefix>/link/<link>/meter/<meter>``, ordered by ``(epoch, lseq)``: the sign never shows
an older pair than one it showed (a repeat or a late delivery changes nothing). A new
``hit`` puts up the winning table's banner, then the meter's new value stays. Pure, like
:class:`progressived.signs.terminal.SignView`: messages in, text out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from progressived.core.money import UNITS_PER_CENT
from progressived.core.wirejson import WireError, loads_object
from progressived.link.core.messages import MAX_PAYLOAD
from progressived.signs.terminal import big, dollars

BANNER_S = 30.0


def link_meter_topic(prefix: str, link: str, meter: str) -> str:
    return f"{prefix}/link/{link}/meter/{meter}"


def _is_hit(hit: object) -> bool:
    """A ``hit`` a sign can announce (docs/link.md, ``meter``): never filled in with defaults."""
    return (
        isinstance(hit, dict)
        and isinstance(hit.get("table"), str)
        and isinstance(hit.get("hand"), str)
        and type(hit.get("seat")) is int
        and type(hit.get("units")) is int
    )


@dataclass
class LinkSignView:
    """What a sign shows for one linked meter."""

    prefix: str
    link_id: str
    meter_id: str
    display: str = "----"
    state: str = "waiting"
    order: tuple[int, int] = (-1, -1)
    last_hit: dict[str, Any] | None = None
    heard: bool = False
    banner: str = ""
    banner_until: float = 0.0
    waiting_for: str = ""
    tables: dict[str, str] = field(default_factory=dict)
    problem: str = ""  # why the last message was ignored as malformed ("" if it was not)
    broker_down: bool = False  # this sign lost its broker: the value may be old

    @property
    def meter_topic(self) -> str:
        return link_meter_topic(self.prefix, self.link_id, self.meter_id)

    def topics(self) -> tuple[str, ...]:
        return (self.meter_topic,)

    def receive(self, topic: str, payload: bytes, now: float | None = None) -> bool:
        """Take one message; returns whether the view changed. Bad payloads are ignored."""
        now = time.monotonic() if now is None else now
        self.problem = ""
        if topic != self.meter_topic:
            return False
        try:
            data = loads_object(payload, max_bytes=MAX_PAYLOAD)
        except WireError as exc:  # too large, too deep, not UTF-8, not a JSON object
            self.problem = exc.words
            return False
        if data.get("link") != self.link_id:
            self.problem = "not this link's meter"
            return False
        units, epoch, lseq = data.get("units"), data.get("epoch"), data.get("lseq")
        if type(units) is not int or type(epoch) is not int or type(lseq) is not int:
            self.problem = "a linked meter needs integer units, epoch and lseq"
            return False
        hit = data.get("hit")
        if hit is not None and not _is_hit(hit):
            self.problem = "a hit needs a table, an integer seat, a hand and integer units"
            return False
        if (epoch, lseq) <= self.order:
            return False  # older than, or the same as, the value shown
        self.order, self.state = (epoch, lseq), "open"
        self.display = dollars(units // UNITS_PER_CENT)
        if isinstance(hit, dict) and hit != self.last_hit:
            if self.heard:  # a sign just started does not announce an old hit
                amount = dollars(hit["units"] // UNITS_PER_CENT)
                self.banner = (
                    f"*** WINNER: table {hit.get('table')} seat {hit.get('seat')} "
                    f"{hit.get('hand')} {amount} ***"
                )
                self.banner_until = now + BANNER_S
            self.last_hit = hit
        self.heard = True
        return True

    def status_line(self) -> str:
        if self.broker_down:
            return "NOT LIVE: this sign lost its broker (last value shown)"
        if self.state == "waiting":
            return f"waiting for {self.waiting_for}" if self.waiting_for else "waiting..."
        return ""

    def render(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        lines = [f"linked progressive {self.meter_id} (link {self.link_id})", ""]
        lines += [big(self.display), ""]
        status = self.status_line()
        if status:
            lines.append(f"[ {status} ]")
        if self.banner and now < self.banner_until:
            lines.append(self.banner)
        return "\n".join(lines)

    def plain(self) -> str:
        banner = f" {self.banner}" if self.banner else ""
        return f"{self.meter_id} {self.display} {self.status_line() or 'OPEN'}{banner}"
