"""The sign's server-drawn HTML, read as a player reads it: the text a screen shows.

Pure: MQTT messages folded by the floor model, drawn by progressived/signs/web/render.py, and
the page's visible text taken out with an HTML parser (no script runs). Names come from the
paytable and the sign file, never ids; amounts are exact; every closed reason is words.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any

from progressived.signs.web.config import sign_config_from
from progressived.signs.web.look import SignConfig
from progressived.signs.web.model import Floor, dollars
from progressived.signs.web.paytable import meter_pay_cents, money
from progressived.signs.web.render import page_html, placeholder, source_html
from progressived.signs.web.words import Closure, Shown, closure, staff_words

T = "progressive/table"
CONNECTED = {"state": "connected", "detail": "", "url": "mqtt://x"}
CONFIG = {
    "sign": {
        "tables": [
            {"id": "tcp-07", "name": "Table 7", "paytable": "tcp-sd-1"},
            {"id": "uth-03", "name": "Table 3", "paytable": "pmg-02", "wager": 10.00},
        ],
        "links": [{"id": "link-a", "name": "Mega Link", "paytable": "pmg-01"}],
    }
}


class Visible(HTMLParser):
    """The text a browser draws: body text outside script and style, not attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.skip = 0
        self.parts: list[str] = []
        self.in_body = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.in_body |= tag == "body"
        self.skip += tag in ("script", "style", "title")

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in ("script", "style", "title")

    def handle_data(self, data: str) -> None:
        if self.in_body and not self.skip and data.strip():
            self.parts.append(" ".join(data.split()))


def visible(html: str) -> str:
    parser = Visible()
    parser.feed(html)
    return " | ".join(parser.parts)


def msg(**data: object) -> bytes:
    return json.dumps(data).encode()


def floor_with(*messages: tuple[str, dict[str, Any]]) -> Floor:
    floor = Floor()
    for topic, data in messages:
        floor.receive(topic, msg(**data), 0)
    return floor


def status(table: str = "tcp-07", boot: str = "b1") -> tuple[str, dict[str, Any]]:
    return f"{T}/{table}/status", {"status": "online", "table": table, "boot": boot}


def meter(
    cents: int, seq: int = 1, table: str = "tcp-07", name: str = "main", **extra: Any
) -> tuple[str, dict[str, Any]]:
    body = {"cents": cents, "display": dollars(cents), "seq": seq, "state": "open",
            "table": table, "meter": name, **extra}  # fmt: skip
    return f"{T}/{table}/meter/{name}", body


def event(kind: str, seq: int, table: str = "tcp-07", **extra: Any) -> tuple[str, dict[str, Any]]:
    # every key docs/mqtt.md's schema requires of the kind (a sign ignores an event without)
    requires: dict[str, dict[str, Any]] = {"award_confirmed": {"by": "sup"}, "round_locked": {"seats": [3]}}
    required = requires.get(kind, {})
    body = {"kind": kind, "table": table, "seq": seq, "round": 4, "seat": 0, **required}
    return f"{T}/{table}/event", {**body, **extra}


def page(floor: Floor, config: dict[str, Any] = CONFIG, only: str = "table/tcp-07") -> str:
    return page_html(sign_config_from(config), floor.snapshot(0), CONNECTED, only)


def test_the_first_frame_shows_the_meter_names_and_paytable_without_ids() -> None:
    html = page(floor_with(status(), meter(123_456_789, 3)))
    text = visible(html)
    assert "Waiting" not in text
    assert "$1,234,567.89" in text and "Table 7" in text
    assert "Three Card Poker Progressive" in text and "AKQ Spades Jackpot" in text
    for hand, pays in (("AKQ Diamonds/Hearts/Clubs", "$500"), ("Straight Flush", "$70")):
        assert f"{hand} | {pays}" in text
    for hidden in ("tcp-07", "akq-spades", "main", "MAIN", "tcp-sd-1"):
        assert hidden not in text, hidden


def test_a_ten_percent_hand_shows_its_dollars_at_the_meter_exactly() -> None:
    # pmg-02 at a configured $10 wager: 10% of $12,345.67 truncated to the cent = $1,234.56;
    # 300 for 1 at $10 = $3,000; envy $5,000 and $1,500 per $5 scale to $10,000 and $3,000.
    html = page(floor_with(status("uth-03"), meter(1_234_567, table="uth-03")), only="table/uth-03")
    text = visible(html)
    assert "Royal Flush | $12,345.67 | 100% | $10,000" in text
    assert "Straight Flush | $1,234.56 | 10% | $3,000" in text
    assert "4 of a Kind | $3,000" in text and "3 of a Kind | $90" in text
    assert meter_pay_cents(1_234_567 * 10_000, __import__("fractions").Fraction(1, 10)) == 123_456


def test_a_links_meter_is_priced_on_its_exact_units() -> None:
    floor = Floor()
    # 10% of 1,000,009,999 units ($1,000.009999) floors to 100,000,999 units: $100.00 (not
    # $100.01 from rounding, nor $100.00 from the truncated cents by chance: 99,999 -> 9,999.9)
    link = {"type": "meter", "link": "link-a", "meter": "pmg", "units": 1_000_999_999,
            "epoch": 1, "lseq": 5}  # fmt: skip
    floor.receive("progressive/link/link-a/meter/pmg", msg(**link), 0)
    text = visible(page(floor, only="link/link-a"))
    assert "Mega Link" in text and "Multi-Link Game Progressive" in text
    assert "$1,000.99" in text  # the meter: whole cents, truncated
    assert "Straight Flush | $100.09 | 10% | $300" in text  # floor(1,000,999,999 / 10) units


def test_pending_names_the_award_table_and_seat() -> None:
    pending = [{"seat": 3, "hand": "akq-spades", "cents": 100_045}]
    floor = floor_with(status(), meter(100_006, 19, state="pending", pending=pending))
    text = visible(page(floor))
    assert "JACKPOT PENDING | AKQ Spades | $1,000.45 | Table 7 · Seat 3" in text


def test_the_winner_banner_names_hand_amount_table_and_asset_number() -> None:
    floor = floor_with(
        status(),
        meter(100_006, 5),
        event("award_confirmed", 6, seat=3, hand="akq-spades", meter="main", cents=100_045),
    )
    text = visible(page(floor))
    assert "WINNER | AKQ Spades | $1,000.45 | Table 7 · Seat 3 | Table asset number tcp-07" in text


def test_a_links_hit_names_the_winning_table_by_its_name_and_asset() -> None:
    floor = Floor(banner_s=30)
    topic = "progressive/link/link-a/meter/pmg"
    base = {"type": "meter", "link": "link-a", "meter": "pmg", "epoch": 1}
    floor.receive(topic, msg(**base, units=50_000_000_000, lseq=1), 0)
    hit = {"table": "uth-03", "seat": 5, "hand": "royal-flush", "units": 50_000_000_000}
    floor.receive(topic, msg(**base, units=10_000_000_000, lseq=2, hit=hit), 1)
    text = visible(page(floor, only="link/link-a"))
    assert (
        "WINNER | Royal Flush | $50,000.00 | Table 3 · Seat 5 | Table asset number uth-03" in text
    )


def test_envy_lines_name_the_hand_and_clear_with_the_next_round() -> None:
    envy = {"seat": 5, "from_seat": 3, "hand": "akq-spades", "cents": 10_000}
    floor = floor_with(status(), meter(100_006, 5), event("envy", 9, **envy))
    assert "ENVY BONUS | Seat 5 wins | $100.00 | · AKQ Spades at Seat 3" in visible(page(floor))
    same_round, topic = event("round_locked", 10), f"{T}/tcp-07/event"
    floor.receive(topic, msg(**same_round[1]), 0)  # a late LOCK of the envy's own round
    assert "Seat 5 wins" in visible(page(floor))
    floor.receive(topic, msg(**{**event("round_locked", 11)[1], "round": 5}), 0)
    assert "Seat 5 wins" not in visible(page(floor))


def test_players_read_calm_words_decided_from_the_typed_reason_never_the_reason() -> None:
    shown = {"board offline": Shown.BACK_SHORTLY, "self-check failed": Shown.CLOSED,
             "operator": Shown.CLOSED, "ledger unavailable": Shown.CLOSED,
             "link-down": Shown.UPDATING, "waiting for link": Shown.UPDATING,
             "link refused: conflict": Shown.CLOSED, "refused: unknown-table": Shown.CLOSED,
             "some future reason": Shown.CLOSED}  # fmt: skip
    for reason, words in shown.items():
        floor = floor_with(status(), meter(100_000, 2, state="closed", closed=[reason]))
        text = visible(page(floor))
        assert f"CLOSED | {words.value}" in text, (reason, text)
        assert reason not in text and "conflict" not in text and "attention" not in text
        # Staff still read the reason, in /state.json and the logs.
        assert reason in floor.snapshot(0)[0]["closed"]
    floor = floor_with(status(), meter(100_000, 2))
    floor.receive(f"{T}/tcp-07/status", msg(status="offline", table="tcp-07"), 0)
    text = visible(page(floor))
    assert f"CLOSED | {Shown.BACK_SHORTLY.value}" in text and "controller" not in text


def test_a_closed_linked_table_says_it_is_not_contributing() -> None:
    link = {"id": "link-a", "epoch": 1, "lseq": 4}
    floor = floor_with(
        status("uth-03"),
        meter(1_000_000, 2, "uth-03", "pmg", state="closed", closed=["link-down"], link=link),
    )
    text = visible(page(floor, only="table/uth-03"))
    assert f"CLOSED | {Shown.UPDATING.value}" in text
    assert "This table is not contributing to Mega Link" in text
    # Its own (local) meter closed while the linked one is open: it still contributes.
    floor = floor_with(
        status("uth-03"),
        meter(1_000_000, 2, "uth-03", "pmg", link=link),
        meter(5_000, 3, "uth-03", "side", state="closed", closed=["operator"]),
    )
    text = visible(page(floor, only="table/uth-03"))
    assert f"CLOSED | {Shown.CLOSED.value}" in text and "not contributing" not in text


def test_levels_are_named_from_the_sign_file_or_the_paytable_never_by_id() -> None:
    config = {"sign": {"tables": [{"id": "t1", "levels": {"mega": "Mega", "mini": "Mini"}}]}}
    floor = floor_with(
        status("t1"), meter(50_000, 1, "t1", "mega"), meter(500, 2, "t1", "mini"),
        meter(70, 3, "t1", "zeta"),
    )  # fmt: skip
    text = visible(page(floor, config, "table/t1"))
    assert "Mega | $500.00 | Mini | $5.00 | Jackpot 3 | $0.70" in text
    assert "mega" not in text and "zeta" not in text


def test_hostile_text_from_the_broker_is_text_never_markup() -> None:
    evil = '<img src=x onerror="alert(1)">'
    floor = floor_with(
        status(), meter(100, 1), event("envy", 2, seat=1, from_seat=2, hand=evil, cents=5)
    )
    html = source_html(floor.snapshot(0)[0], SignConfig())
    assert "<img src=x" not in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html


def test_a_page_for_a_table_the_server_has_not_heard_of_says_waiting() -> None:
    text = visible(page_html(SignConfig(), [], CONNECTED, "table/nope"))
    assert text == "Waiting for a table to publish its meter… | STALE"
    shown = visible(page_html(sign_config_from(CONFIG), [placeholder("table", "tcp-07")],
                              CONNECTED, "table/tcp-07"))  # fmt: skip
    assert "Table 7" in shown and "Waiting for a table to publish its meter…" in shown


def test_a_page_drawn_while_the_broker_is_unreachable_says_stale_at_once() -> None:
    html = page_html(SignConfig(), [], {"state": "unreachable", "detail": "refused"}, "")
    assert 'data-stale="true"' in html and "Jackpot meter updating soon" in visible(html)
    assert "refused" not in visible(html)  # for staff: the bar's data-detail, /state.json
    assert 'data-detail="broker unreachable (refused)"' in html


def test_money_is_exact_at_every_size() -> None:
    assert money(9_999_999_999) == "$99,999,999.99" == dollars(9_999_999_999)
    assert money(250_000, whole=True) == "$2,500" and money(250_050, whole=True) == "$2,500.50"
    assert money(5) == "$0.05" and money(-150) == "-$1.50"


def test_a_huge_text_from_the_broker_is_cut_on_screen() -> None:
    floor = floor_with(
        status(),
        meter(100, 1, state="closed", closed=["x" * 10_000]),
        event("envy", 2, seat=1, from_seat=2, hand="h" * 10_000, cents=5),
    )
    text = visible(page(floor))
    assert "x" * 20 not in text  # an unknown reason is never on the glass
    assert "h" * 79 + "…" in text and "h" * 80 not in text


def test_a_reason_is_typed_once_and_staff_read_it_with_its_token() -> None:
    assert closure("link refused: unknown-meter") is Closure.LINK_REFUSED
    assert closure("operator") is Closure.OPERATOR
    assert closure("some future reason") is Closure.OTHER
    said = staff_words(["link refused: unknown-meter", "operator", "operator"])
    assert said == (
        "the link controller refused this table (see its code) (link refused: unknown-meter); "
        "closed by an operator (operator)"
    )


def test_a_bank_says_progressive_jackpot_once_per_tile_and_no_raw_link_id() -> None:
    floor = floor_with(status("t1"), meter(100_000, 1, "t1"))
    floor.receive("progressive/link/link-a/meter/pmg",
                  json.dumps({"link": "link-a", "units": 10**9, "epoch": 1, "lseq": 1}).encode(), 0)  # fmt: skip
    html = page_html(SignConfig(), floor.snapshot(0), CONNECTED, "")
    text = visible(html)
    assert text.lower().count("progressive jackpot") == 2, text  # one level name per tile
    assert "Link link-a" not in html and 'data-fallback="Linked progressive"' in html
