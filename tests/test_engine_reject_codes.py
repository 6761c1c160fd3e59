"""The engine's rejection codes are one enum, each value a documented wire string.

A code is what a program matches on (the journaled ``command_rejected``'s ``code``, the
metrics label): docs/engine.md's "Rejection codes" table must list exactly the enum's
values, so a code added or renamed in the engine fails here until the page says so.
"""

from __future__ import annotations

import re
from pathlib import Path

from progressived.config.paytables import find_paytable
from progressived.core.params import MeterParams, TableParams
from progressived.engine import KeyHand, Lock, Reconcile, decide, initial_state
from progressived.engine.decision import RejectCode, Rejected

ROOT = Path(__file__).resolve().parent.parent
AT = "2026-11-21T19:00:00Z"


def documented_codes() -> list[str]:
    page = (ROOT / "docs" / "engine.md").read_text()
    section = page.split("### Rejection codes", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z-]+)` \|", section, flags=re.MULTILINE)


def test_docs_list_every_rejection_code_once() -> None:
    documented = documented_codes()
    assert len(documented) == len(set(documented))
    assert sorted(documented) == sorted(code.value for code in RejectCode)


def test_a_rejection_carries_the_enum_and_its_wire_string() -> None:
    params = TableParams(
        table_id="t1", paytable=find_paytable("tcp-sd-1"), meters=(MeterParams(),), seats=7
    )
    state = initial_state(params, AT).state
    refused = decide(params, state, Reconcile(at=AT))
    assert isinstance(refused, Rejected)
    assert refused.code is RejectCode.NOT_LOCKED and refused.code == "not-locked"
    locked = decide(params, state, Lock(at=AT)).state
    bad = decide(params, locked, KeyHand(seat=9, hand="akq-spades", at=AT))
    assert isinstance(bad, Rejected) and bad.code is RejectCode.BAD_SEAT
    again = decide(params, locked, Lock(at=AT))
    assert isinstance(again, Rejected) and again.code is RejectCode.ALREADY_LOCKED
