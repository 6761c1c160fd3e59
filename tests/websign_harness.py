"""A web sign server process and a headless Chromium looking at it, for the browser tests.

Chromium and its driver are Debian's (``apt-get install chromium chromium-driver``; .ci/test
installs them). Selenium is told where they are, so it never downloads a browser.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

from progressived.testing.broker import free_port, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = ("chromium", "/usr/bin/chromium")
DRIVER = ("chromedriver", "/usr/bin/chromedriver")


def _which(names: tuple[str, ...]) -> str | None:
    for name in names:
        found = shutil.which(name) or (name if os.path.isfile(name) else None)
        if found:
            return found
    return None


def browser(width: int = 1920, height: int = 1080) -> webdriver.Chrome:
    chromium, driver = _which(CHROMIUM), _which(DRIVER)
    if chromium is None or driver is None:
        pytest.fail(
            "the browser tests need Debian's chromium and chromium-driver: "
            "sudo apt-get install chromium chromium-driver (.ci/test installs them as root)"
        )
    options = Options()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
        "--hide-scrollbars",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=options)


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
    banner_s: float = 4.0
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    runs: int = 0

    async def start(self) -> WebSign:
        self.port = self.port or free_port()
        self.runs += 1
        log = (self.tmp / f"websign-{self.runs}.log").open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "progressived.cli.ctl",
                "sign",
                "--web",
                "--listen",
                f"127.0.0.1:{self.port}",
                "--port",
                str(self.broker_port),
                "--banner-s",
                str(self.banner_s),
                "--keepalive-s",
                "1",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        await asyncio.to_thread(wait_for_port, "127.0.0.1", self.port, 15)
        return self

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = self.proc.wait(10)
        self.proc = None
        return code

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


SOURCE_JS = """
const box = document.querySelector('section.source[data-key="table/' + arguments[0] + '"]');
if (!box) return null;
const meters = {};
for (const m of box.querySelectorAll('.meter')) {
  meters[m.dataset.meter] = {amount: m.querySelector('.amount').textContent, state: m.dataset.state};
}
const banner = box.querySelector('.banner');
return {
  meters: meters,
  banner: banner ? banner.textContent : '',
  pending: [...box.querySelectorAll('.pending-award')].map((p) => p.textContent),
  why: (box.querySelector('.why') || {}).textContent || '',
  envy: [...box.querySelectorAll('.envy li')].map((li) => li.textContent),
  stale: document.body.dataset.stale === 'true',
  staleWhy: document.getElementById('stale-why').textContent,
};
"""


async def seen(driver: webdriver.Chrome, table: str) -> dict[str, Any] | None:
    """What the page shows for one table (None until it shows it)."""
    result: dict[str, Any] | None = await asyncio.to_thread(driver.execute_script, SOURCE_JS, table)
    return result


async def until(
    driver: webdriver.Chrome,
    table: str,
    predicate: Callable[[dict[str, Any]], bool],
    what: str,
    timeout: float = 15.0,
) -> dict[str, Any]:
    """Wait until the page's picture of ``table`` satisfies ``predicate``; fail saying what."""
    deadline = time.monotonic() + timeout
    last: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        last = await seen(driver, table)
        if last is not None and predicate(last):
            return last
        await asyncio.sleep(0.1)
    raise AssertionError(f"the page never showed {what}; it showed {last}")
