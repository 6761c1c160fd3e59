"""A table's configuration against its link controller's: what the link would refuse.

The two files live on different machines and each is valid alone; what makes them work
together is that they agree. ``progressived check-config TABLE.toml --link LINK.toml``
checks that before the first LOCK does it the hard way (docs/link.md, "Refusal codes"):

* the table joins this link (``[link] id``), under the same MQTT topic prefix;
* the link lists the table (else every message is refused ``unknown-table``);
* every linked meter is a meter of the link under its ``link_meter`` id (else every
  contribution is refused ``unknown-meter``);
* the link's meter pays every hand the table's paytable pays from that meter, at the same
  percentage (else a claim is refused ``unknown-hand``, or priced otherwise than the
  table's paytable says).

Each problem is one ``key: reason`` naming the table file's key (pure: no I/O).
"""

from __future__ import annotations

from fractions import Fraction

from progressived.config.daemon import DaemonConfig
from progressived.core.params import TableParams
from progressived.link.runtime.config import LinkConfig


def _percent(value: Fraction) -> str:
    pct = value * 100
    return f"{pct.numerator}%" if pct.denominator == 1 else f"{float(pct):g}%"


def _hands(params: TableParams, meter_id: str) -> dict[str, Fraction]:
    """The hands the table's paytable pays as a percentage of ``meter_id``."""
    return {
        r.hand.value: r.pay.percent
        for r in params.paytable.hands
        if r.pay.from_meter and r.pay.meter == meter_id
    }


def pair_problems(table: DaemonConfig, link: LinkConfig) -> list[str]:
    """Why ``table`` and ``link`` would not play together (empty when they would)."""
    lp, params, src = link.params, table.params, str(link.source)
    if table.link is None:
        return ["link: the table joins no link (its file has no [link] section)"]
    out: list[str] = []
    if table.link.id != lp.link_id:
        out.append(f"link.id: {table.link.id!r} is not the id of the link in {src} ({lp.link_id})")
    if table.mqtt.prefix != link.mqtt.prefix:
        out.append(
            f"mqtt.prefix: {table.mqtt.prefix!r} differs from the link's {link.mqtt.prefix!r}: "
            "the two would never hear each other"
        )
    if params.table_id not in lp.tables:
        out.append(
            f"table.id: link {lp.link_id} does not list table {params.table_id} in its tables "
            f"({', '.join(sorted(lp.tables))}): it would refuse every message (unknown-table)"
        )
    names = ", ".join(m.id for m in lp.meters)
    for index, meter in enumerate(params.meters):
        if meter.link is None:
            continue
        key = f"progressive.meters[{index}]"
        spec = lp.meter(meter.link_meter_id)
        if spec is None:
            hint = f'; link_meter = "{lp.meters[0].id}"?' if len(lp.meters) == 1 else ""
            out.append(
                f"{key}.link_meter: link {lp.link_id} has no meter {meter.link_meter_id!r} "
                f"(its meters: {names}): it would refuse every contribution "
                f"(unknown-meter){hint}"
            )
            continue
        for hand, percent in sorted(_hands(params, meter.id).items()):
            paid = spec.hands.get(hand)
            if paid is None:
                out.append(
                    f"{key}: paytable {params.paytable.id} pays {hand} from meter {meter.id}, "
                    f"link meter {spec.id} does not pay it: the link would refuse the claim "
                    "(unknown-hand)"
                )
            elif paid != percent:
                out.append(
                    f"{key}: paytable {params.paytable.id} pays {hand} {_percent(percent)} of "
                    f"meter {meter.id}, link meter {spec.id} pays {_percent(paid)}"
                )
    return out
