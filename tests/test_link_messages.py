"""The link message protocol: strict JSON both ways, schemas that agree with the decoder."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from progressived.link.core import messages as m
from progressived.link.core.schemas import all_schemas, schema
from tests.budget import examples

ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.:-]{0,20}\Z")
hashes = st.from_regex(r"\A[0-9a-f]{64}\Z")
heads = st.builds(m.LedgerHead, seq=st.integers(0, m.MAX_SEQ), hash=hashes)
seqs = st.integers(1, m.MAX_SEQ)
units = st.integers(0, m.MAX_UNITS)
at = st.text(max_size=40)
envelope = {"table": ids, "seq": seqs, "id": ids, "head": heads, "at": at}
awards = st.builds(
    m.Award,
    claim=ids,
    meter=ids,
    hand=ids,
    units=units,
    order=st.integers(0, m.MAX_SEQ),
    share_of=st.integers(1, 64),
    state=st.sampled_from(["pending", "paid", "rejected"]),
)
table_messages = st.one_of(
    st.builds(
        m.Contribution,
        **envelope,
        round=st.integers(0, 10**6),
        wagers=st.lists(
            st.builds(m.MeterWagers, meter=ids, count=st.integers(1, 1000), units=units),
            max_size=5,
        ).map(tuple),
    ),
    st.builds(
        m.Claim,
        **envelope,
        claim=ids,
        round=st.integers(0, 99),
        seat=st.integers(1, 12),
        hand=ids,
        meter=ids,
    ),
    st.builds(m.ClaimConfirm, **envelope, claim=ids, by=ids),
    st.builds(m.ClaimReject, **envelope, claim=ids, by=ids),
    st.builds(m.Reversal, **envelope, of=ids, round=st.integers(0, 99)),
)
link_common = {"link": ids, "lseq": st.integers(0, m.MAX_SEQ), "head": heads}
link_messages = st.one_of(
    st.builds(
        m.Result,
        **link_common,
        table=ids,
        seq=st.integers(0, 99),
        id=ids,
        status=st.sampled_from(m.STATUSES),
        code=st.text(max_size=40),
        reason=st.text(max_size=500),
        resend_from=st.integers(0, 99),
        awards=st.lists(awards, max_size=3).map(tuple),
    ),
    st.builds(m.AwardUpdate, **link_common, table=ids, award=awards),
    st.builds(m.Heartbeat, **link_common, table=ids, expect=seqs, at=at),
    st.builds(
        m.LinkedMeter,
        **link_common,
        meter=ids,
        units=units,
        epoch=st.integers(0, 99),
        hit=st.none() | st.builds(m.Hit, table=ids, seat=st.integers(1, 12), hand=ids, units=units),
    ),
)
SCHEMAS = all_schemas()
VALIDATORS = {kind: jsonschema.Draft202012Validator(schema) for kind, schema in SCHEMAS.items()}


def valid(payload: dict[str, Any]) -> bool:
    kind = payload.get("type")
    if not isinstance(kind, str) or kind not in VALIDATORS:
        return False
    return VALIDATORS[kind].is_valid(payload)


@settings(max_examples=examples(300))
@given(table_messages)
def test_table_message_round_trips_and_matches_its_schema(message: m.TableMessage) -> None:
    raw = m.encode(message)
    assert m.decode_table(raw) == message
    assert m.encode(m.decode_table(raw)) == raw  # canonical: equal messages, equal bytes
    assert valid(json.loads(raw))
    # A contribution's hand-written encoding is the generic canonical one, byte for byte.
    generic = json.dumps(m.to_dict(message), sort_keys=True, separators=(",", ":")).encode()
    assert raw == generic


@settings(max_examples=examples(300))
@given(link_messages)
def test_link_message_round_trips_and_matches_its_schema(message: object) -> None:
    raw = m.encode(message)
    assert m.decode_link(raw) == message
    assert valid(json.loads(raw))
    # A result's hand-written encoding is the generic canonical one, byte for byte.
    generic = json.dumps(m.to_dict(message), sort_keys=True, separators=(",", ":")).encode()
    assert raw == generic


json_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.text(max_size=70),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    hashes,
    st.just(""),
    st.just(0),
    st.just(m.MAX_SEQ + 1),
)


@settings(max_examples=examples(500), suppress_health_check=[HealthCheck.too_slow])
@given(table_messages, st.data())
def test_decoder_and_schema_agree_on_mutated_payloads(
    message: m.TableMessage, data: st.DataObject
) -> None:
    """Replace, drop or add one key anywhere: the decoder accepts exactly what the schema does."""
    payload = json.loads(m.encode(message))
    target = payload
    if data.draw(st.booleans()) and "head" in payload:
        target = payload["head"]
    action = data.draw(st.sampled_from(["replace", "drop", "add"]))
    key = data.draw(st.sampled_from(sorted(target)))
    if action == "replace":
        target[key] = data.draw(json_values)
    elif action == "drop":
        del target[key]
    else:
        target[data.draw(st.text(min_size=1, max_size=8))] = data.draw(json_values)
    expected = valid(payload)
    try:
        m.decode_table(json.dumps(payload))
        accepted = True
    except m.MessageError:
        accepted = False
    assert accepted == expected, payload


GOOD = m.encode(
    m.Claim(
        table="t1",
        seq=1,
        id="t1-1",
        head=m.LedgerHead(3, "a" * 64),
        at="2026-11-23T17:00:00Z",
        claim="c1",
        round=4,
        seat=2,
        hand="royal-flush",
        meter="pmg",
    )
).decode()


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ("{", "bad-json"),
        ("[1]", "bad-json"),
        (GOOD.replace('"seat":2', '"seat":2,"seat":3'), "bad-json"),
        (GOOD.replace('"seat":2', '"seat":true'), "bad-field"),
        (GOOD.replace('"seat":2', '"seat":2.0'), "bad-field"),
        (GOOD.replace('"seat":2', '"seat":NaN'), "bad-json"),
        (GOOD.replace('"seat":2', '"seat":13'), "out-of-range"),
        (GOOD.replace('"seq":1', '"seq":0'), "out-of-range"),
        (GOOD.replace('"seq":1', f'"seq":{m.MAX_SEQ + 1}'), "out-of-range"),
        (GOOD.replace('"type":"claim"', '"type":"award"'), "bad-type"),
        (GOOD.replace('"seat":2', '"seat":2,"extra":1'), "bad-field"),
        (GOOD.replace('"seat":2,', ""), "bad-field"),
        (GOOD.replace('"a' + "a" * 63, '"A' + "a" * 63), "bad-field"),
        (GOOD.replace('"table":"t1"', '"table":"t1\\n"'), "bad-field"),
        (GOOD.replace('"table":"t1"', '"table":"../t1"'), "bad-field"),
        (GOOD.replace('"at":"', '"at":"' + "x" * 5000 + "x" * 20000), "too-large"),
        (b"\xff\xfe", "bad-json"),
    ],
)
def test_malformed_payloads_are_refused_with_a_code(payload: str | bytes, code: str) -> None:
    with pytest.raises(m.MessageError) as caught:
        m.decode_table(payload)
    assert caught.value.code == code
    assert caught.value.reason


def test_good_payload_decodes() -> None:
    claim = m.decode_table(GOOD)
    assert isinstance(claim, m.Claim) and claim.hand == "royal-flush" and claim.head.seq == 3


def test_topics_name_the_parties_so_an_acl_can_confine_them() -> None:
    assert m.from_table_topic("progressive", "l1", "t7") == "progressive/link/l1/from/t7"
    assert m.to_table_topic("progressive", "l1", "t7") == "progressive/link/l1/to/t7"
    assert m.meter_topic("progressive", "l1", "pmg") == "progressive/link/l1/meter/pmg"
    assert m.table_of_topic("progressive", "l1", "progressive/link/l1/from/t7") == "t7"
    assert m.table_of_topic("progressive", "l1", "progressive/link/l2/from/t7") is None
    assert m.table_of_topic("progressive", "l1", "progressive/link/l1/from/t7/x") is None


def test_every_message_type_has_a_schema_requiring_its_envelope() -> None:
    for cls in m.TABLE_TYPES.values():
        required = schema(cls)["required"]
        assert {"table", "seq", "id", "head"} <= set(required)
    for kind in ("result", "award", "heartbeat", "meter"):
        assert "head" in SCHEMAS[kind]["required"] and "link" in SCHEMAS[kind]["required"]


def test_docs_link_md_prints_the_schemas_and_valid_examples() -> None:
    """docs/link.md cannot drift: its schemas are the code's, its examples decode."""
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "link.md").read_text()
    blocks = [json.loads(b.split("```", 1)[0]) for b in text.split("```json\n")[1:]]
    documented = {b["title"]: b for b in blocks if "$schema" in b}
    assert documented == SCHEMAS
    examples = [b for b in blocks if "$schema" not in b]
    kinds = {e["type"] for e in examples}
    assert kinds == set(SCHEMAS)
    for example in examples:
        raw = json.dumps(example)
        decoded = m.decode_table(raw) if example["type"] in m.TABLE_TYPES else m.decode_link(raw)
        assert json.loads(m.encode(decoded)) == example
