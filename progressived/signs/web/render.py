"""The sign's HTML, drawn on the server: the page's first frame and every update after it.

A page is already the picture the server holds when the browser receives it, so a screen
never flashes "waiting" for a meter the server knows, and a browser without script shows
the truth. Every update on ``/events`` carries the same fragment for the source that
changed, drawn by :func:`source_html`, so one renderer draws both; the page's script
(static/sign.js) swaps fragments in, rolls the digits up, fits them to the screen, ends a
celebration and says STALE. Everything that came over MQTT is escaped: a hostile payload
can put text on the sign, never markup.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from progressived.signs.web.look import SignConfig, SourceLook
from progressived.signs.web.model import dollars
from progressived.signs.web.paytable import hand_name, level_name, money, pay_rows
from progressived.signs.web.words import Closure, closure, player_words

WAITING = "Waiting for a table to publish its meter…"
UPDATING = "Jackpot meter updating soon"  # what players read while the sign is STALE
# Advance widths (em) of a bold sans's glyphs, for the first frame's digit size before the
# script measures the real font (DejaVu Sans Bold, the kiosk's default font on Debian).
_EM = {",": 0.38, ".": 0.38, "-": 0.42}
_DIGIT_EM = 0.7


SHOWN_CHARS = 80  # a text that came over MQTT is cut to this on screen (a sign, not a log)


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _t(text: object, most: int = SHOWN_CHARS) -> str:
    """Text from a message, for the screen: escaped and cut to ``most`` characters, so a
    hostile or broken publisher can neither inject markup nor push the layout apart."""
    shown = str(text)
    return _e(shown if len(shown) <= most else shown[: most - 1] + "…")


def em_width(text: str) -> float:
    """The width of ``text`` in em, estimated (the script measures it exactly)."""
    return round(sum(_EM.get(ch, _DIGIT_EM) for ch in text), 2)


def source_state(src: Mapping[str, Any]) -> str:
    """``closed``, ``pending``, ``waiting`` or ``open``: what the whole source shows."""
    meters = src["meters"]
    if src["status"] == "offline" or any(m["state"] == "closed" for m in meters):
        return "closed"
    if src["pending"] or any(m["state"] == "pending" for m in meters):
        return "pending"
    if not meters or all(m["state"] == "waiting" for m in meters):
        return "waiting"
    return "open"


def placeholder(kind: str, ident: str) -> dict[str, Any]:
    """A source the sign file names but the broker has not mentioned yet."""
    return {
        "key": f"{kind}/{ident}",
        "kind": kind,
        "id": ident,
        "status": "unknown",
        "boot": "",
        "closed_reason": "",
        "closed": [],
        "meters": [],
        "pending": [],
        "banner": None,
        "envy_round": -1,
        "envy": [],
    }


def _head(src: Mapping[str, Any], look: SourceLook, config: SignConfig) -> str:
    # The game's title when something says it (the sign file, the paytable); never a generic
    # "Progressive Jackpot" over a level already called that (it read twice on every tile).
    title = config.title or (look.paytable.title if look.paytable else "")
    logo = '<img class="logo" src="/logo" alt="">' if config.logo else ""
    # A bank tile must say which table it is: the table's asset number; a link's meter is
    # "Linked progressive" (its id means nothing to players).
    fallback = "Linked progressive" if src["kind"] == "link" else str(src["id"])
    shown = f'<div class="title">{_e(title)}</div>' if title else ""
    return (
        f'<header class="head">{logo}<div class="titles">'
        f"{shown}"
        f'<div class="where" data-fallback="{_t(fallback)}">{_e(look.name)}</div>'
        "</div></header>"
    )


def _meters(src: Mapping[str, Any], look: SourceLook) -> str:
    meters: Sequence[Mapping[str, Any]] = src["meters"]
    if not meters:
        return (
            '<div class="levels" data-count="1"><div class="meter" data-state="waiting">'
            f'<div class="level">{_e(level_name(look, "main", 0, 1))}</div>'
            f'<div class="reel"><span class="amount waiting">{_e(WAITING)}</span></div>'
            "</div></div>"
        )
    parts = [f'<div class="levels" data-count="{len(meters)}">']
    for index, meter in enumerate(meters):
        state = "closed" if src["status"] == "offline" else meter["state"]
        shown = dollars(int(meter["cents"])) if state != "waiting" else "----"
        parts.append(
            f'<div class="meter" data-meter="{_e(meter["meter"])}" data-state="{_e(state)}" '
            f'data-cents="{int(meter["cents"])}" data-seq="{int(meter["seq"])}" '
            f'data-boot="{_e(meter["boot"])}" data-level="{index}">'
            f'<div class="level">{_e(level_name(look, meter["meter"], index, len(meters)))}</div>'
            f'<div class="reel"><span class="amount" style="--em:{em_width(shown)}">'
            f'{_e(shown)}</span><span class="fault"></span></div></div>'
        )
    parts.append("</div>")
    return "".join(parts)


def _status(src: Mapping[str, Any], look: SourceLook, config: SignConfig) -> str:
    lines = []
    where = config.table_name(str(src["id"]))  # pending awards are the table's own
    for award in src["pending"]:
        lines.append(
            f'<div class="pending-award" data-seat="{int(award["seat"])}">'
            f'<span class="tag">JACKPOT PENDING</span> {_t(hand_name(look, award["hand"]))} '
            f'<span class="money">{_e(money(int(award["cents"])))}</span> '
            f"{_t(where)} · Seat {int(award['seat'])}</div>"
        )
    if source_state(src) == "closed":
        # Players read a calm line decided from the typed reasons; the reasons themselves are
        # for staff (/state.json, the logs), never on the glass.
        closures = (
            [Closure.CONTROLLER_OFFLINE]
            if src["status"] == "offline"
            else [closure(str(r)) for r in src["closed"]]
        )
        words = player_words(closures)
        lines.append(f'<div class="why"><span class="tag">CLOSED</span> {_e(words)}</div>')
        offline = src["status"] == "offline"
        links = sorted(
            {
                str(m["link"])
                for m in src["meters"]
                if m.get("link") and (offline or m["state"] == "closed")
            }
        )
        for link in links:
            name = config.look("link", link).name or "the linked jackpot"
            lines.append(
                f'<div class="not-contributing">This table is not contributing to {_t(name)}</div>'
            )
    return f'<div class="status">{"".join(lines)}</div>'


def _paytable(src: Mapping[str, Any], look: SourceLook) -> str:
    rows = pay_rows(look, src["meters"])
    if not rows:
        return ""
    envy = any(row.envy for row in rows)
    head = '<tr><th></th><th class="pays">Pays</th><th></th>'
    head += '<th class="envy-col">Envy bonus</th></tr>' if envy else "</tr>"
    body = []
    for row in rows:
        share = _e(row.share) if row.share and row.meter else ""
        cells = (
            f'<th class="hand">{_e(row.hand)}</th><td class="pays">{_e(row.pays)}</td>'
            f'<td class="share">{share}</td>'
        )
        if envy:
            cells += f'<td class="envy-col">{_e(row.envy)}</td>'
        body.append(f'<tr data-meter="{_e(row.meter)}">{cells}</tr>')
    return f'<table class="paytable"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def _envy(src: Mapping[str, Any], look: SourceLook) -> str:
    if not src["envy"]:
        return ""
    items = "".join(
        f'<li data-seat="{int(e["seat"])}">Seat {int(e["seat"])} wins '
        f'<span class="money">{_e(money(int(e["cents"])))}</span> · '
        f"{_t(hand_name(look, e['hand']))} at Seat {int(e['from_seat'])}</li>"
        for e in src["envy"]
    )
    tag = '<span class="tag">ENVY BONUS</span>'
    return f'<div class="envy-line">{tag}<ul class="envy">{items}</ul></div>'


def _banner(src: Mapping[str, Any], look: SourceLook, config: SignConfig) -> str:
    banner = src["banner"]
    if not banner:
        return ""
    table = str(banner.get("table") or src["id"])
    seat = int(banner["seat"])
    return (
        f'<div class="banner" data-remaining-ms="{int(banner["remaining_ms"])}" '
        f'data-seat="{seat}"><div class="banner-head">WINNER</div>'
        f'<div class="banner-hand">{_t(hand_name(look, banner["hand"]))}</div>'
        f'<div class="banner-amount">{_e(money(int(banner["cents"])))}</div>'
        f'<div class="banner-where">{_t(config.table_name(table))} · Seat {seat}</div>'
        f'<div class="banner-asset">Table asset number {_t(table)}</div></div>'
    )


def source_html(src: Mapping[str, Any], config: SignConfig) -> str:
    """One table or link as the sign shows it (the same fragment on every page)."""
    look = config.look(str(src["kind"]), str(src["id"]))
    return (
        f'<section class="source" id="src-{_e(src["key"])}" data-key="{_e(src["key"])}" '
        f'data-kind="{_e(src["kind"])}" data-state="{source_state(src)}" '
        f'data-status="{_e(src["status"])}">'
        + _head(src, look, config)
        + _meters(src, look)
        + _status(src, look, config)
        + _paytable(src, look)
        + _envy(src, look)
        + _banner(src, look, config)
        + "</section>"
    )


def _colours(config: SignConfig) -> str:
    c = config.colours
    return (
        f":root{{--bg:{c.background};--fg:{c.text};--title:{c.title};--meter:{c.meter};"
        f"--pending:{c.pending};--closed:{c.closed};--dimmed:{c.dimmed};"
        f"--win-bg:{c.winner_background};--win-fg:{c.winner_text}}}"
    )


def page_html(
    config: SignConfig,
    sources: Sequence[Mapping[str, Any]],
    broker: Mapping[str, Any],
    only: str = "",
) -> str:
    """The whole page: every source (``only`` empty: the bank of tables) or one of them."""
    kind = "bank" if not only else only.split("/", 1)[0]
    shown = [s for s in sources if not only or s["key"] == only]
    count = max(1, len(shown))
    cols = math.ceil(math.sqrt(count))
    rows = math.ceil(count / cols)
    stale = broker.get("state") != "connected"
    why = ""
    if stale:
        detail = f" ({broker['detail']})" if broker.get("detail") else ""
        why = f"broker {broker.get('state', 'connecting')}{detail}"
    body = "".join(source_html(s, config) for s in shown)
    if not shown:
        body = f'<p id="empty" class="quiet">{_e(WAITING)}</p>'
    looks = [config.look(str(s["kind"]), str(s["id"])) for s in shown]
    titles = {look.paytable.title if look.paytable else "" for look in looks}
    common = titles.pop() if len(titles) == 1 else ""
    title = config.title or common or "Progressive jackpot"  # the browser tab's title
    heading = ""
    if kind == "bank" and (config.title or config.logo):  # each tile has its own title
        logo = '<img class="logo" src="/logo" alt="">' if config.logo else ""
        heading = f'<header id="top">{logo}<span id="title">{_e(title)}</span></header>'
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n"
        '<link rel="stylesheet" href="/static/sign.css">\n'
        f"<style>{_colours(config)}</style>\n</head>\n"
        f'<body class="page-{kind}" data-only="{_e(only)}" data-stale="{str(stale).lower()}" '
        f'data-odometer-ms="{config.odometer_ms}">\n{heading}'
        f'<main id="floor" data-count="{count}" style="--cols:{cols};--rows:{rows}">'
        f"{body}</main>\n"
        f'<div id="stale" data-detail="{_e(why)}"{"" if stale else " hidden"}>'
        f'<strong>STALE</strong> <span id="stale-why">{_e(UPDATING if stale else "")}</span>'
        "</div>\n"
        '<script src="/static/sign.js"></script>\n</body>\n</html>\n'
    )
