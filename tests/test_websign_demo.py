"""``progressived demo`` serves the web sign: its banner prints the URL, and while the demo
plays that URL answers with the demo table's meter (read as a browser's page would, from
the server's snapshot), drawn into the page with the names of the demo's sign file."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from progressived.testing.waits import until_sync

pytestmark = pytest.mark.e2e  # real processes end to end (pyproject.toml's markers)


def test_the_demo_prints_the_sign_url_and_serves_it(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "progressived.cli.daemon", "demo", "--headless", "--rounds", "2",
         "--workdir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    url = ""
    lines: list[str] = []
    snapshot: dict[str, Any] = {}
    try:
        for line in proc.stdout:
            lines.append(line)
            found = re.match(r"web sign    (http://127\.0\.0\.1:\d+)/table/demo-1 ", line)
            if found:
                url = found.group(1)
                break
        assert url, "".join(lines)

        def with_meters() -> dict[str, Any] | None:
            try:
                with urllib.request.urlopen(f"{url}/state.json", timeout=2) as answer:
                    got: dict[str, Any] = json.load(answer)
            except (urllib.error.URLError, ConnectionError):
                return None
            return got if any(s.get("meters") for s in got.get("sources", [])) else None

        snapshot = until_sync(with_meters, "the demo's meter on the web sign", 60, every=0.2)
        with urllib.request.urlopen(f"{url}/table/demo-1", timeout=2) as page:
            html = page.read().decode()
        # The server draws the page with the meter it holds, the names from its sign file.
        assert "/static/sign.js" in html and "Waiting for a table" not in html
        assert "Demo Table" in html and "Three Card Poker Progressive" in html
    finally:
        rest, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, "".join(lines) + rest
    sources = {s["key"]: s for s in snapshot["sources"]}
    assert snapshot["broker"]["state"] == "connected"
    meters = sources["table/demo-1"]["meters"]
    assert meters and meters[0]["meter"] == "main" and meters[0]["display"].startswith("$")
