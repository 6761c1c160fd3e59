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
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic.dataclasses import is_pydantic_dataclass

from bench import link_decode
from progressived.link.core import messages as m
from progressived.link.core import schemas, snapshot
from tests.link_rig import Rig

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


PARTS = (m.LedgerHead, m.MeterWagers, m.Award, m.Hit)
MODELS = (*m.TABLE_TYPES.values(), *m.LINK_TYPES.values(), *PARTS)
HEAD = m.LedgerHead(3, "a" * 64)


def test_every_message_and_part_is_a_frozen_pydantic_model() -> None:
    for cls in MODELS:
        assert is_pydantic_dataclass(cls), cls
    with pytest.raises(dataclasses.FrozenInstanceError):
        HEAD.seq = 4
    assert m.LedgerHead(3, "a" * 64) == m.LedgerHead(seq=3, hash="a" * 64)  # positional, as before
    assert hash(m.MeterWagers("pmg", 1, 10_000)) == hash(m.MeterWagers("pmg", 1, 10_000))


@pytest.mark.parametrize(
    "build",
    [
        lambda: m.Claim(table="t1", seq=1, id="t1:1", head=HEAD, at="", claim="c", round=1,
                        seat=13, hand="royal-flush", meter="pmg"),
        lambda: m.Contribution(table="t1", seq=0, id="t1:1", head=HEAD, at="", round=1,
                               wagers=()),
        lambda: m.MeterWagers("pmg", 1, 10**15 + 1),
        lambda: m.MeterWagers("pmg", True, 1),  # a bool is not a count
        lambda: m.Hit(table="t1", seat=2, hand="royal-flush", units=1.0),  # money is an int
        lambda: m.LedgerHead(3, "A" * 64),
        lambda: m.Award(claim="c", meter="pmg", hand="h", units=1, order=1, share_of=1,
                        state="lost"),
        lambda: m.Result(link="l", table="t1", seq=1, id="i", status="applied", code="ok",
                         reason="x" * (m.MAX_REASON + 1), resend_from=0, lseq=0, head=HEAD),
        lambda: m.Result(link="l", table="t1", seq=1, id="i", status="applied", code="ok",
                         reason="", resend_from=0, lseq=0, head=HEAD,
                         awards=(m.Award(claim="c", meter="pmg", hand="h", units=1, order=1,
                                         share_of=1, state="paid"),) * 65),
        lambda: m.Heartbeat(link="l", table="t1\n", expect=1, lseq=0, head=HEAD, at=""),
    ],
)  # fmt: skip
def test_a_message_the_decoder_would_refuse_cannot_be_built(build: Any) -> None:
    """Built in the process or decoded from outside, a message is checked by the same model:
    neither side can send what the other refuses."""
    with pytest.raises(ValueError, match="validation error"):
        build()


def _integer_bounds(schema: dict[str, Any], path: tuple[Any, ...] = ()) -> Any:
    """Every integer property of a schema (nested parts too) with its path and bounds."""
    for name, prop in schema.get("properties", {}).items():
        for choice in prop.get("oneOf", [prop]):
            if choice.get("type") == "integer":
                yield (*path, name), choice["minimum"], choice["maximum"]
            elif choice.get("type") == "object":
                yield from _integer_bounds(choice, (*path, name))
            elif choice.get("type") == "array":
                yield from _integer_bounds(choice["items"], (*path, name, 0))


def _with(payload: dict[str, Any], path: tuple[Any, ...], value: Any) -> str:
    changed = copy.deepcopy(payload)
    target = changed
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return json.dumps(changed)


@pytest.mark.parametrize("base", sorted(CORPUS["bases"]))
def test_each_integer_bound_of_a_schema_is_the_decoders(base: str) -> None:
    """From the schema alone: each integer at its minimum and maximum decodes, one beyond
    either is refused ``out-of-range`` (nested heads, hits, awards and wagers included)."""
    payload = CORPUS["bases"][base]
    side = "table" if base in m.TABLE_TYPES else "link"
    bounds = [b for b in _integer_bounds(schemas.schema(type_of(payload["type"])))
              if payload.get(b[0][0], 0) is not None]  # fmt: skip
    assert len(bounds) >= 2
    for path, low, high in bounds:
        assert verdict(side, _with(payload, path, low)) == "ok", path
        assert verdict(side, _with(payload, path, high)) == "ok", path
        assert verdict(side, _with(payload, path, low - 1)) == "out-of-range", path
        assert verdict(side, _with(payload, path, high + 1)) == "out-of-range", path


def type_of(kind: str) -> type[Any]:
    return m.TABLE_TYPES.get(kind) or m.LINK_TYPES[kind]


@pytest.mark.parametrize(
    ("where", "value"),
    [("status", "bogus"), ("code", "x" * 41), ("lseq", -1), ("reason", 7)],
)
def test_a_snapshot_whose_stored_result_is_no_valid_result_is_not_read(
    tmp_path: Path, where: str, value: object
) -> None:
    """A stored result is read back through the same model as a decoded one."""
    rig = Rig(tmp_path)
    rig.play()
    text = snapshot.dumps(rig.link._recorded, rig.link.book)
    rig.close()
    data = json.loads(text)
    tracks = data["tables"]
    stored = next(r for t in tracks.values() for _, _, r in t["results"])
    stored[where] = value
    with pytest.raises(snapshot.SnapshotError):
        snapshot.from_dict(data)


def test_docs_link_md_says_which_of_two_faults_decides_the_code() -> None:
    text = (Path(__file__).parent.parent / "docs" / "link.md").read_text()
    said = " ".join(text.split())
    assert 'a `claim` with `"seat": 13` and `"meter": 5` is `out-of-range`' in said
    assert 'with `"seq": 0` and `"meter": 5`, `bad-field`' in said
    claim = dict(CORPUS["bases"]["claim"])
    assert verdict("table", json.dumps({**claim, "seat": 13, "meter": 5})) == "out-of-range"
    assert verdict("table", json.dumps({**claim, "seq": 0, "meter": 5})) == "bad-field"
    assert verdict("table", json.dumps({**claim, "seq": 0})) == "out-of-range"


def test_a_snapshot_whose_claim_has_no_award_state_is_not_read(tmp_path: Path) -> None:
    """A claim's state becomes an award's: one the model refuses is refused on reading."""
    rig = Rig(tmp_path)
    rig.play()
    data = json.loads(snapshot.dumps(rig.link._recorded, rig.link.book))
    rig.close()
    assert data["claims"]
    data["claims"][0]["state"] = "lost"
    with pytest.raises(snapshot.SnapshotError, match="state"):
        snapshot.from_dict(data)
