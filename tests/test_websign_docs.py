"""docs/sign.md shows every screenshot the browser tests take, and only those: each state a
test puts the sign in is on the page, and no picture there is stale or orphaned."""

from __future__ import annotations

import re

from tests.conftest import ROOT

SIGN_DOC = ROOT / "docs" / "sign.md"
SHOTS = ROOT / "docs" / "sign"


def taken_by_tests() -> set[str]:
    names: set[str] = set()
    for test in (ROOT / "tests").glob("test_websign_*.py"):
        text = test.read_text()
        if "save_screenshot" in text:  # the browser tests; others name images of their own
            names |= set(re.findall(r'["\']([a-z0-9-]+\.png)["\']', text))
    return names


def test_every_screenshot_is_shown_and_every_one_shown_is_taken() -> None:
    shown = set(re.findall(r"\]\(sign/([a-z0-9-]+\.png)\)", SIGN_DOC.read_text()))
    taken = taken_by_tests()
    assert {"open.png", "pending.png", "winner.png", "closed.png", "stale.png"} <= taken
    assert shown == taken, (sorted(shown - taken), sorted(taken - shown))
    assert {p.name for p in SHOTS.glob("*.png")} == taken
