"""The sign as a player sees it on any screen: headless Chromium against the real sign
server and a real Mosquitto, fed docs/mqtt.md's payloads by a scripted controller.

At 1920x1080, 1280x720, 1080x1920 and 1024x768 the meter's digits span at least 70% of the
screen's width at $99,999,999.99 and more at a smaller value, centred; no text leaves the
screen or its box, nothing scrolls, every text is at least 7:1 against what is behind it;
three levels stack, the first largest; a bank of tables tiles the screen; and the page's
first frame, drawn by the server, already shows the meter with the script turned off. With
PROGRESSIVE_SIGN_SCREENSHOTS=1 the screenshots land in docs/sign/.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from progressived.testing.broker import Mosquitto
from tests.websign_feed import TableFeed
from tests.websign_geometry import layout_problems, meters, settled, texts, viewport
from tests.websign_harness import (
    WebSign,
    browsers,
    screenshots,
    sign_servers,
    stream_until,
    until_shown,
)

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)

__all__ = ["browsers", "sign_servers"]  # the fixtures this module uses

SCREENS = ((1920, 1080), (1280, 720), (1080, 1920), (1024, 768))
BIG, SMALL = 9_999_999_999, 100_045  # $99,999,999.99 and $1,000.45
SIGN_FILE = """
[sign]
odometer_ms = 0

[[sign.tables]]
id = "tcp-07"
name = "Table 7"
paytable = "tcp-sd-1"

[[sign.tables]]
id = "uth-03"
name = "Table 3"
paytable = "uth-01"
levels = { main = "Grand", major = "Major", minor = "Minor" }
"""
BANK = ("tcp-01", "tcp-02", "tcp-03", "tcp-04", "tcp-05", "tcp-06")
BANK_FILE = '[sign]\ntitle = "Three Card Poker"\n' + "".join(
    f'[[sign.tables]]\nid = "{t}"\nname = "Table {n}"\npaytable = "tcp-sd-1"\n'
    for n, t in enumerate(BANK, 1)
)


async def start(
    mosquitto: Mosquitto,
    tmp_path: Path,
    sign_servers: Callable[..., WebSign],
    sign_file: str = SIGN_FILE,
) -> WebSign:
    config = tmp_path / "sign.toml"
    config.write_text(sign_file)
    return await sign_servers(mosquitto.port, config=config).start()


def assert_fills(page: dict[str, Any], width: int, share: float) -> dict[str, Any]:
    """One meter: its digits span ``share`` of the screen's width or more, centred."""
    (meter,) = page["meters"]
    assert meter["width"] >= share * width, (meter, width)
    assert abs(meter["left"] - (width - meter["right"])) <= 0.02 * width, meter
    return dict(meter)


async def test_one_meter_fills_any_screen_centred_readable_and_inside_it(
    mosquitto: Mosquitto,
    tmp_path: Path,
    sign_servers: Callable[..., WebSign],
    browsers: Callable[..., Any],
) -> None:
    sign = await start(mosquitto, tmp_path, sign_servers)
    shots = screenshots(tmp_path)
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        feed = TableFeed(client, "tcp-07")
        await feed.online()
        driver = browsers(1920, 1080)
        share: dict[int, list[float]] = {}
        fonts: dict[int, list[float]] = {}
        for cents, shown in ((BIG, "$99,999,999.99"), (SMALL, "$1,000.45")):
            await feed.meter("main", cents)  # the second one, a decrease, is shown at once
            if cents == BIG:
                await asyncio.to_thread(driver.get, sign.url("/table/tcp-07"))
            await until_shown(
                driver, "tcp-07", lambda p, s=shown: p["meters"]["main"]["amount"] == s, shown
            )
            for width, height in SCREENS:
                await viewport(driver, width, height)
                meter = assert_fills(await meters(driver, "table/tcp-07"), width, 0.70)
                share.setdefault(cents, []).append(meter["width"] / width)
                fonts.setdefault(cents, []).append(meter["font"])
                assert layout_problems(await texts(driver)) == [], (shown, width, height)
                wrapped = await asyncio.to_thread(driver.execute_script, WRAPPED_JS)
                assert wrapped == [], (width, height, wrapped)  # a name on one line, any screen
                if cents == SMALL and (width, height) in ((1080, 1920), (1024, 768)):
                    name = "portrait.png" if height > width else "four-three.png"
                    await asyncio.to_thread(driver.save_screenshot, str(shots / name))
        # A smaller value: larger digits on every screen, spanning as much of its width.
        for at in range(len(SCREENS)):
            assert fonts[SMALL][at] > 1.3 * fonts[BIG][at], fonts
            assert share[SMALL][at] >= share[BIG][at] - 0.005, share
        await viewport(driver, 1920, 1080)
        page = await until_shown(driver, "tcp-07", lambda p: bool(p["paytable"]), "the paytable")
        assert page["paytable"][0][:3] == ["AKQ Spades", "$1,000.45", "100%"]
        assert page["title"] == "Three Card Poker Progressive" and page["where"] == "Table 7"
        for hidden in ("tcp-07", "akq", "MAIN", "main"):
            assert hidden not in page["text"], hidden
        await asyncio.to_thread(driver.save_screenshot, str(shots / "open.png"))
        print("share of the screen's width", share)


async def test_three_levels_stack_the_first_largest(
    mosquitto: Mosquitto,
    tmp_path: Path,
    sign_servers: Callable[..., WebSign],
    browsers: Callable[..., Any],
) -> None:
    sign = await start(mosquitto, tmp_path, sign_servers)
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        feed = TableFeed(client, "uth-03")
        await feed.online()
        for meter, cents in (("main", BIG), ("major", 2_500_000), ("minor", 25_075)):
            await feed.meter(meter, cents)
        driver = browsers(1920, 1080)
        await asyncio.to_thread(driver.get, sign.url("/table/uth-03"))
        page = await until_shown(driver, "uth-03", lambda p: len(p["meters"]) == 3, "three levels")
        assert [m["level"] for m in page["meters"].values()] == ["Grand", "Major", "Minor"]
        for width, height in SCREENS:
            await viewport(driver, width, height)
            levels = (await meters(driver, "table/uth-03"))["meters"]
            assert [m["meter"] for m in levels] == ["main", "major", "minor"]
            tops = [m["top"] for m in levels]
            assert tops == sorted(tops) and all(
                a["bottom"] <= b["top"] + 1 for a, b in itertools.pairwise(levels)
            )
            assert levels[0]["font"] > levels[1]["font"] > levels[2]["font"]
            assert layout_problems(await texts(driver)) == [], (width, height)
            if (width, height) == SCREENS[0]:
                await asyncio.to_thread(
                    driver.save_screenshot, str(screenshots(tmp_path) / "levels.png")
                )


async def test_a_bank_of_tables_tiles_the_screen(
    mosquitto: Mosquitto,
    tmp_path: Path,
    sign_servers: Callable[..., WebSign],
    browsers: Callable[..., Any],
) -> None:
    sign = await start(mosquitto, tmp_path, sign_servers, BANK_FILE)
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        for number, table in enumerate(BANK):
            feed = TableFeed(client, table)
            await feed.online()
            await feed.meter("main", 100_000 * 10 ** (number % 5) + number)
        driver = browsers(1920, 1080)
        await asyncio.to_thread(driver.get, sign.url("/"))
        await until_shown(driver, BANK[-1], lambda p: bool(p["meters"]), "the whole bank")
        for width, height in SCREENS:
            await viewport(driver, width, height)
            tiles = [await meters(driver, f"table/{table}") for table in BANK]
            for tile in tiles:
                left, top, right, bottom = tile["tile"]
                assert left >= 0 and top >= 0 and right <= width + 0.5 and bottom <= height + 0.5
                (meter,) = tile["meters"]
                assert left <= meter["left"] and meter["right"] <= right, tile
                assert meter["width"] >= 0.6 * (right - left), tile
            boxes = [t["tile"] for t in tiles]
            for i, a in enumerate(boxes):
                for b in boxes[i + 1 :]:
                    assert (
                        a[2] <= b[0] + 0.5
                        or b[2] <= a[0] + 0.5
                        or a[3] <= b[1] + 0.5
                        or b[3] <= a[1] + 0.5
                    )
            assert layout_problems(await texts(driver)) == [], (width, height)
            if (width, height) == SCREENS[0]:
                await asyncio.to_thread(
                    driver.save_screenshot, str(screenshots(tmp_path) / "bank.png")
                )


async def test_the_first_frame_shows_the_meter_before_any_script_runs(
    mosquitto: Mosquitto,
    tmp_path: Path,
    sign_servers: Callable[..., WebSign],
    browsers: Callable[..., Any],
) -> None:
    """The server already holds the meter: the page as delivered (the script turned off)
    shows it, names and paytable included, inside the screen; never "waiting"."""
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        feed = TableFeed(client, "tcp-07")
        await feed.online()
        await feed.meter("main", SMALL)
        sign = await start(mosquitto, tmp_path, sign_servers)
        # The server has read the retained meter: its stream says so.
        await stream_until(sign.url("/events"), lambda s: '"cents":100045' in s)
        driver = browsers(1280, 720)
        await asyncio.to_thread(
            driver.execute_cdp_cmd, "Emulation.setScriptExecutionDisabled", {"value": True}
        )
        await asyncio.to_thread(driver.get, sign.url("/table/tcp-07"))
        html = await outer_html(driver)
        assert "$1,000.45" in html and "Table 7" in html and "AKQ Spades" in html
        assert "Waiting" not in html
        box = await asyncio.to_thread(driver.execute_cdp_cmd, "DOM.getDocument", {"depth": -1})
        found = await asyncio.to_thread(
            driver.execute_cdp_cmd,
            "DOM.querySelector",
            {"nodeId": box["root"]["nodeId"], "selector": ".amount"},
        )
        model = await asyncio.to_thread(
            driver.execute_cdp_cmd, "DOM.getBoxModel", {"nodeId": found["nodeId"]}
        )
        xs, ys = model["model"]["border"][0::2], model["model"]["border"][1::2]
        assert min(xs) >= 0 and max(xs) <= 1280 and min(ys) >= 0 and max(ys) <= 720
        assert max(xs) - min(xs) >= 0.6 * 1280  # the server's estimate is close to the fit
        await settled_without_script(driver)


async def outer_html(driver: Any) -> str:
    doc = await asyncio.to_thread(driver.execute_cdp_cmd, "DOM.getDocument", {"depth": -1})
    found = await asyncio.to_thread(
        driver.execute_cdp_cmd, "DOM.getOuterHTML", {"nodeId": doc["root"]["nodeId"]}
    )
    return str(found["outerHTML"])


async def settled_without_script(driver: Any) -> None:
    await asyncio.to_thread(
        driver.execute_cdp_cmd, "Emulation.setScriptExecutionDisabled", {"value": False}
    )
    await settled(driver)


# The title, the table's name and each hand's name that the browser laid out on more than one
# line (the lines of a text are its range's client rectangles at distinct heights).
WRAPPED_JS = """
const out = [];
for (const el of document.querySelectorAll('.head .title, .head .where, .paytable th')) {
  if (!el.textContent.trim()) continue;
  const range = document.createRange();
  range.selectNodeContents(el);
  const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
  if (tops.size > 1) out.push(el.textContent);
}
return out;
"""
