"""The sign server's HTTP side in process (aiohttp's own test client, no broker needed):
the page drawn with what the server holds, the logo from the sign file, the link's page;
and the browser tests' fixtures leave no sign process behind when a browser fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from progressived.signs.broker import BrokerLogin
from progressived.signs.web.config import sign_config_from
from progressived.signs.web.server import SignServer
from tests.conftest import ROOT

SVG = b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 4 1"/>'


def server(tmp_path: Path) -> SignServer:
    logo = tmp_path / "logo.svg"
    logo.write_bytes(SVG)
    config = sign_config_from(
        {"sign": {"logo": str(logo), "tables": [{"id": "t1", "name": "Table 1", "paytable": "tcp-sd-1"}],
                  "links": [{"id": "link-a", "name": "Mega Link"}]}}
    )  # fmt: skip
    sign = SignServer(BrokerLogin(), tables=config.shown("table"), links=config.shown("link"),
                      config=config)  # fmt: skip
    sign.broker = "connected"
    return sign


async def test_pages_are_drawn_with_what_the_server_holds_and_the_logo_is_served(
    tmp_path: Path,
) -> None:
    sign = server(tmp_path)
    body = {"cents": 123_456, "display": "$1,234.56", "seq": 4, "state": "open",
            "table": "t1", "meter": "main"}  # fmt: skip
    sign.take("progressive/table/t1/meter/main", json.dumps(body).encode())
    async with TestClient(TestServer(sign.app())) as client:
        page = await client.get("/table/t1")
        html = await page.text()
        assert page.status == 200 and page.headers["Cache-Control"] == "no-cache"
        assert "$1,234.56" in html and "Table 1" in html and 'src="/logo"' in html
        assert "Waiting" not in html and 'data-stale="false"' in html
        logo = await client.get("/logo")
        assert (logo.status, logo.content_type, await logo.read()) == (200, "image/svg+xml", SVG)
        link = await (await client.get("/link/link-a")).text()
        assert "Mega Link" in link and "Waiting for a table to publish its meter…" in link
        bank = await (await client.get("/")).text()
        assert bank.count('class="source"') == 2  # the heard table and the link not heard yet
        state = await (await client.get("/state.json")).json()
        assert [s["key"] for s in state["sources"]] == ["table/t1"]  # only what was heard
        assert (await client.get("/table/t1/extra")).status == 404


async def test_without_a_logo_there_is_none(tmp_path: Path) -> None:
    async with TestClient(TestServer(SignServer(BrokerLogin()).app())) as client:
        assert (await client.get("/logo")).status == 404
        assert 'src="/logo"' not in await (await client.get("/")).text()


INNER = '''
from pathlib import Path

import bench.websign_pixels as pixels
from tests.websign_harness import browsers, sign_servers

__all__ = ["browsers", "sign_servers"]


async def test_the_browser_fails_to_start(mosquitto, sign_servers, browsers, monkeypatch):
    sign = await sign_servers(mosquitto.port, args=("--table", "t1")).start()
    Path({pidfile!r}).write_text(str(sign.proc.pid))
    monkeypatch.setattr(pixels, "_found", lambda *names: None)  # no chromium on this machine
    browsers(1280, 720)
'''


@pytest.mark.e2e
def test_a_browser_that_fails_to_start_leaves_no_sign_server_behind(tmp_path: Path) -> None:
    pidfile = tmp_path / "sign.pid"
    inner = tmp_path / "test_inner.py"
    inner.write_text(INNER.format(pidfile=str(pidfile)))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(inner), "-q", "-p", "no:randomly", "-p",
         "tests.conftest", "-c", str(ROOT / "pyproject.toml"), "-p", "no:cacheprovider"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "chromium-driver" in done.stdout  # it failed the way a missing browser fails
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists(), f"progressivectl sign --web {pid} was left running"
