"""The link's messages as models: one source for the decoder and the schema, same refusals.

``tests/link_decode_codes.json`` holds 1,500 payloads (every message type, each with one to
three keys replaced, dropped or added, lists filled to 64 or 65 entries) and the verdict the
decoder gave each one before the messages became models: ``ok`` or its refusal code. The
decoder must give the same verdict today: the first fault in the order the message's fields
are written decides the code, a table message's ``seq`` of 0 is reported only when nothing
else is wrong, and unknown keys come before any field.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from bench import link_decode
from progressived.link.core import messages as m

CORPUS = json.loads((Path(__file__).parent / "link_decode_codes.json").read_text())


def _expand(value: Any) -> Any:
    """The corpus writes a long run of one character as ``{"$repeat": [char, n]}``."""
    if isinstance(value, dict):
        if set(value) == {"$repeat"}:
            char, n = value["$repeat"]
            return char * n
        return {k: _expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v) for v in value]
    return value


def _payload(case: dict[str, Any]) -> dict[str, Any]:
    payload = copy.deepcopy(CORPUS["bases"][case["base"]])
    for edit in _expand(case["edits"]):
        target = payload
        for step in edit[0]:
            target = target[step]
        if edit[1] == "drop":
            del target[edit[2]]
        elif edit[1] == "set":
            target[edit[2]] = edit[3]
        else:  # fill: a list of n copies of one item
            target[edit[2]] = [copy.deepcopy(edit[3]) for _ in range(edit[4])]
    return payload


def verdict(side: str, raw: str | bytes) -> str:
    decode = m.decode_table if side == "table" else m.decode_link
    try:
        decode(raw)
    except m.MessageError as exc:
        refused = exc
    else:
        return "ok"
    assert refused.reason, "a refusal says why"
    return refused.code


def test_every_recorded_payload_gets_the_verdict_it_got_before_the_models() -> None:
    wrong = []
    for case in CORPUS["cases"]:
        side = "table" if case["base"] in m.TABLE_TYPES else "link"
        got = verdict(side, json.dumps(_payload(case)))
        if got != case["code"]:
            wrong.append((case, got))
    assert not wrong, f"{len(wrong)} differ, e.g. {wrong[:3]}"
    assert {c["code"] for c in CORPUS["cases"]} == {"ok", "bad-field", "bad-type", "out-of-range"}


def test_the_micro_benchmark_decodes_and_refuses_what_it_names() -> None:
    for name, (side, raw) in link_decode.payloads().items():
        expected = "out-of-range" if "seat 13" in name else "bad-field" if "refused" in name else "ok"
        assert verdict(side, raw) == expected, name
    figures = link_decode.measure(number=5, repeat=1)
    assert set(figures) == set(link_decode.payloads())
    assert all(row["per_s"] > 0 for row in figures.values())
