"""The odometer, sampled every animation frame: the digits roll up between two published
values, never show a value above the meter the page was given, reach it within one second,
show a decrease (a hit) at once, and do not move at all under ``prefers-reduced-motion``.

A scripted controller publishes meters to a real Mosquitto, the real sign server forwards
them, and a ``requestAnimationFrame`` loop in the page records, every frame, the amount on
screen and the published value the page holds (``data-cents``); the test asserts on every
frame it collected.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from progressived.testing.broker import Mosquitto
from tests.websign_feed import TableFeed
from tests.websign_harness import WebSign, browsers, sign_servers, until_shown

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)

__all__ = ["browsers", "sign_servers"]  # the fixtures this module uses

ODOMETER_MS = 700
FRAME_MS = 50  # a frame late under load still counts as "within one second"
SAMPLER_JS = """
window.__frames = [];
const loop = (ts) => {
  const m = document.querySelector('.meter[data-meter="main"]');
  if (m) {
    const text = m.querySelector('.amount').textContent;
    window.__frames.push([performance.timeOrigin + ts, Number(m.dataset.cents), text]);
  }
  requestAnimationFrame(loop);
};
requestAnimationFrame(loop);
"""
# Increases close together (one lands mid-roll), a pause, a hit (a decrease), a last rise.
STEPS = [
    (100_000, 1.2),
    (100_450, 0.3),
    (1_234_567, 1.3),
    (1_234_582, 1.2),
    (100_006, 1.2),
    (100_321, 1.4),
]


def cents(text: str) -> int:
    digits = text.replace("$", "").replace(",", "").replace(".", "")
    assert digits.isdigit(), text
    return int(digits)


async def run(
    mosquitto: Mosquitto,
    tmp_path: Path,
    sign_servers: Callable[..., WebSign],
    browsers: Callable[..., Any],
    reduced_motion: bool,
) -> tuple[list[tuple[float, int, str]], list[tuple[float, int]]]:
    config = tmp_path / "sign.toml"
    config.write_text(f'[sign]\nodometer_ms = {ODOMETER_MS}\n[[sign.tables]]\nid = "t1"\n')
    sign = await sign_servers(mosquitto.port, config=config).start()
    published: list[tuple[float, int]] = []
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        feed = TableFeed(client, "t1")
        await feed.online()
        await feed.meter("main", 99_000)
        driver = browsers(1280, 720, reduced_motion=reduced_motion)
        await asyncio.to_thread(driver.get, sign.url("/table/t1"))
        await until_shown(driver, "t1", lambda p: p["meters"]["main"]["amount"] == "$990.00", "the start")
        await asyncio.to_thread(driver.execute_script, SAMPLER_JS)
        for value, pause in STEPS:
            published.append((time.time() * 1000, value))
            await feed.meter("main", value)
            await asyncio.sleep(pause)  # the page's own time to roll: what is measured
        frames = await asyncio.to_thread(driver.execute_script, "return window.__frames")
    return [(float(t), int(c), str(x)) for t, c, x in frames], published


def check(frames: list[tuple[float, int, str]], published: list[tuple[float, int]]) -> int:
    """Assert the odometer's rules on every frame; return how many in-between values showed."""
    values = {v for _, v in published} | {99_000}
    assert frames, "no frame was sampled"
    between = 0
    for t, held, text in frames:
        shown = cents(text)
        assert held in values, (t, held)
        assert shown <= held, f"showed {text} above the published {held} at {t}"
        before = [v for at, v in published if at <= t]
        assert shown <= max(before or [99_000]), (t, text)
        between += shown != held
    # Each published value the page held: a decrease shown in its first frame; any value
    # shown within 1 s of its first frame unless a newer one came first.
    changes = [i for i in range(len(frames)) if i == 0 or frames[i][1] != frames[i - 1][1]]
    for n, first in enumerate(changes):
        t0, held, text = frames[first]
        previous = frames[first - 1][1] if first else None
        if previous is not None and held < previous:
            assert cents(text) == held, f"a decrease to {held} rolled: first showed {text}"
        end = changes[n + 1] if n + 1 < len(changes) else len(frames)
        reached = [t for t, _, x in frames[first:end] if cents(x) == held]
        if frames[end - 1][0] - t0 >= 1000 + FRAME_MS:
            assert reached and reached[0] - t0 <= 1000 + FRAME_MS, (held, t0, reached[:1])
    return between


async def test_the_digits_roll_up_never_above_the_meter_and_reach_it_within_a_second(
    mosquitto: Mosquitto,
    tmp_path: Path,
    sign_servers: Callable[..., WebSign],
    browsers: Callable[..., Any],
) -> None:
    frames, published = await run(mosquitto, tmp_path, sign_servers, browsers, False)
    between = check(frames, published)
    assert between > 10, f"only {between} in-between frames: the digits did not roll"
    print(f"{len(frames)} frames, {between} rolling")


async def test_reduced_motion_shows_each_value_at_once(
    mosquitto: Mosquitto,
    tmp_path: Path,
    sign_servers: Callable[..., WebSign],
    browsers: Callable[..., Any],
) -> None:
    frames, published = await run(mosquitto, tmp_path, sign_servers, browsers, True)
    assert check(frames, published) == 0, "a value rolled under prefers-reduced-motion"
