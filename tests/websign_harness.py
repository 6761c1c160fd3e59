"""A web sign server process and headless Chromium looking at it, for the browser tests.

Chromium and its driver are Debian's (``apt-get install chromium chromium-driver``; .ci/test
installs them). Selenium is told where they are, so it never downloads a browser.

Every sign process and browser a test starts belongs to a fixture (``sign_servers``,
``browsers``) whose teardown is bounded: a sign is sent SIGTERM, then SIGKILL after 10 s; a
browser is quit, and its driver killed if quitting hangs. So a browser that fails to start
(or a test that fails half-way) never leaves a ``progressivectl sign --web`` behind.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from selenium import webdriver

from bench.websign_pixels import NoBrowser, chromium, quit_chromium
from progressived.testing.broker import free_port, listens
from progressived.testing.waits import WaitTimeout, until

ROOT = Path(__file__).resolve().parent.parent
STOP_S = 10.0  # a sign process or a browser gets this long to stop before it is killed
START_S = 60.0  # the longest a sign process may take to listen (imports, on a loaded machine)


def browser(
    width: int = 1920, height: int = 1080, reduced_motion: bool = False, profile: Path | None = None
) -> webdriver.Chrome:
    """Headless Chromium with a viewport of exactly ``width`` x ``height`` CSS pixels (the
    bench's, bench/websign_pixels.py); the test fails saying what to install if it is not."""
    try:
        return chromium(width, height, reduced_motion, profile)
    except NoBrowser as exc:
        pytest.fail(f"{exc} (.ci/test installs them as root)")


def quit_browser(chrome: webdriver.Chrome) -> None:
    quit_chromium(chrome, STOP_S)


def screenshots(tmp: Path) -> Path:
    """Where screenshots go: docs/sign/ when PROGRESSIVE_SIGN_SCREENSHOTS=1, else tmp."""
    where = ROOT / "docs" / "sign" if os.environ.get("PROGRESSIVE_SIGN_SCREENSHOTS") else tmp
    where.mkdir(parents=True, exist_ok=True)
    return where


@dataclass
class WebSign:
    """``progressivectl sign --web`` as a real process on a free loopback port."""

    broker_port: int
    tmp: Path
    banner_s: float | None = 4.0
    config: Path | None = None
    args: tuple[str, ...] = ()
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    runs: int = 0
    logs: list[Path] = field(default_factory=list)

    def command(self) -> list[str]:
        cmd = [
            sys.executable, "-m", "progressived.cli.ctl", "sign", "--web",
            "--listen", f"127.0.0.1:{self.port}", "--port", str(self.broker_port),
            "--keepalive-s", "1", *self.args,
        ]  # fmt: skip
        if self.banner_s is not None:
            cmd += ["--banner-s", str(self.banner_s)]
        if self.config is not None:
            cmd += ["--config", str(self.config)]
        return cmd

    async def start(self) -> WebSign:
        """Start the process; return once it holds its listening socket itself (a port
        taken meanwhile by another test's server is chosen again, never shared)."""
        chosen = not self.port
        for _ in range(3):
            self.port = self.port or free_port()
            self.runs += 1
            log = self.tmp / f"websign-{self.runs}.log"
            self.logs.append(log)
            with log.open("wb") as out:
                self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT)
            proc = self.proc
            try:
                await until(partial(self._up_or_ended, proc), f"the sign on {self.port}", START_S)
            except BaseException:
                self.close()
                raise
            if proc.poll() is None:
                return self
            self.proc = None
            if not chosen:
                break
            self.port = 0
        raise AssertionError(f"the sign did not start: {self.logs[-1].read_text()[-2000:]}")

    def _up_or_ended(self, proc: subprocess.Popen[bytes]) -> bool:
        return listens(proc.pid, "127.0.0.1", self.port) or proc.poll() is not None

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = self.proc.wait(STOP_S)
        self.proc = None
        return code

    def close(self) -> None:
        """Stop the process if it still runs: SIGTERM, then SIGKILL after STOP_S."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_S)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def sign_servers(tmp_path: Path) -> Iterator[Callable[..., WebSign]]:
    """Make sign servers (``sign_servers(broker_port, ...)``); all are stopped at teardown."""
    made: list[WebSign] = []

    def make(broker_port: int, **kwargs: Any) -> WebSign:
        sign = WebSign(broker_port, tmp_path, **kwargs)
        made.append(sign)
        return sign

    yield make
    for sign in made:
        sign.close()


@pytest.fixture
def browsers(tmp_path: Path) -> Iterator[Callable[..., webdriver.Chrome]]:
    """Open headless Chromiums (``browsers(width, height, reduced_motion=...)``), each with a
    fresh profile; all are quit (bounded) at teardown."""
    opened: list[webdriver.Chrome] = []

    def open_browser(width: int = 1920, height: int = 1080, reduced_motion: bool = False) -> Any:
        profile = tmp_path / f"chromium-{len(opened)}"
        chrome = browser(width, height, reduced_motion, profile)
        opened.append(chrome)
        return chrome

    yield open_browser
    for chrome in opened:
        quit_browser(chrome)


SOURCE_JS = """
const box = document.querySelector('section.source[data-key="' + arguments[0] + '"]');
if (!box) return null;
const meters = {};
for (const m of box.querySelectorAll('.meter[data-meter]')) {
  meters[m.dataset.meter] = {amount: m.querySelector('.amount').textContent, state: m.dataset.state,
                             level: m.querySelector('.level').textContent};
}
const text = (sel) => [...box.querySelectorAll(sel)].map((n) => n.textContent);
const banner = box.querySelector('.banner');
return {
  state: box.dataset.state,
  title: (box.querySelector('.title') || {}).textContent || '',
  where: (box.querySelector('.where') || {}).textContent || '',
  meters: meters,
  banner: banner ? banner.innerText : '',
  pending: text('.pending-award'),
  why: (box.querySelector('.why') || {}).textContent || '',
  contributing: text('.not-contributing'),
  envy: text('.envy li'),
  paytable: [...box.querySelectorAll('.paytable tbody tr')].map(
    (r) => [...r.children].map((c) => c.textContent)),
  stale: document.body.dataset.stale === 'true',
  staleWhy: document.getElementById('stale-why').textContent,
  staleDetail: document.getElementById('stale').dataset.detail || '',
  text: box.innerText,
};
"""


async def stream_until(url: str, predicate: Callable[[str], bool], timeout: float = 15) -> str:
    """Read a sign's ``/events`` until a ``data:`` line satisfies ``predicate``; return it."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as answer,
    ):
        async for raw in answer.content:
            line = raw.decode()
            if line.startswith("data: ") and predicate(line):
                return line
    raise AssertionError(f"{url} ended without the awaited message")


def key(ident: str, kind: str = "table") -> str:
    return f"{kind}/{ident}"


async def seen(driver: webdriver.Chrome, source: str) -> dict[str, Any] | None:
    """What the page shows for one source, ``table/<id>`` (a bare id is a table's)."""
    which = source if "/" in source else key(source)
    result: dict[str, Any] | None = await asyncio.to_thread(driver.execute_script, SOURCE_JS, which)
    return result


async def until_shown(
    driver: webdriver.Chrome,
    source: str,
    predicate: Callable[[dict[str, Any]], bool],
    what: str,
    timeout: float = 15.0,
) -> dict[str, Any]:
    """Wait until the page's picture of ``source`` satisfies ``predicate``; fail saying what
    (the timeout's message ends with what the page last showed)."""

    last: list[dict[str, Any] | None] = [None]

    async def shown() -> dict[str, Any] | None:
        last[0] = page = await seen(driver, source)
        return page if page is not None and predicate(page) else None

    try:
        found: dict[str, Any] = await until(shown, f"the page to show {what}", timeout, every=0.1)
    except WaitTimeout as exc:
        raise WaitTimeout(f"the page never showed {what}; it showed {last[0]}") from exc
    return found
