"""The bounded decoder of outside bytes (progressived/core/wirejson.py): every refusal has its
code, the depth scan agrees with the real nesting, and whatever the standard library reads
within the bounds reads the same here."""

from __future__ import annotations

import json
import math
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from progressived.core import wirejson as w
from tests.budget import examples

BIG = 1 << 20


def code_of(payload: bytes | str, *, max_bytes: int = BIG, obj: bool = False) -> str:
    refusal: w.WireError | None = None
    try:
        if obj:
            w.loads_object(payload, max_bytes=max_bytes)
        else:
            w.loads(payload, max_bytes=max_bytes)
    except w.WireError as exc:
        refusal = exc
    if refusal is None:
        return "ok"
    assert refusal.code in w.CODES and refusal.reason and len(str(refusal)) < 300
    return refusal.code


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (b"[" * 1500 + b"]" * 1500, "too-deep"),  # the 3,000 bytes that stopped the link
        (b"[" * 100_000 + b"]" * 100_000, "too-deep"),
        (b'{"a":' * 1500 + b"1" + b"}" * 1500, "too-deep"),
        (b"[" * 100_000, "too-deep"),  # never closed: the scan, not the parser, stops it
        (b"[" * 32 + b"]" * 32, "ok"),  # exactly the bound
        (b"[" * 33 + b"]" * 33, "too-deep"),
        (b'["' + b"[" * 5000 + b'"]', "ok"),  # brackets in a string are text
        (b'["\\"' + b"[" * 5000 + b'"]', "ok"),  # ... after an escaped quote too
        (b'["\\\\", ' + b"[" * 40 + b"]" * 40 + b"]", "too-deep"),  # an escaped backslash
        (b"\xff\xfe{}", "not-utf8"),
        (b'{"a": "\xc3\x28"}', "not-utf8"),
        (b"\xef\xbb\xbf{}", "not-json"),  # a byte-order mark is not JSON text
        (b"{", "not-json"),
        (b'{"a": 1, "a": 2}', "not-json"),
        (b'{"a": {"b": 1, "b": 1}}', "not-json"),
        (b"[NaN]", "not-json"),
        (b"[-Infinity]", "not-json"),
        (b"[1e400]", "not-json"),  # would be inf
        (b"1" * 5000, "not-json"),  # Python stops at 4,300 digits; we stop far earlier
        (str(2**63).encode(), "not-json"),
        (str(2**63 - 1).encode(), "ok"),
        (str(-(2**63 - 1)).encode(), "ok"),
        (b'"\\ud800"', "not-json"),  # a lone surrogate: no character
        (b'{"\\udc00": 1}', "not-json"),
        (b"[1e308, -1E+308, 1e-400, 123456789012345678.9e-300]", "ok"),
        (b"[1e309]", "not-json"),
        (b"[-1E+400]", "not-json"),
        (b"[0.000e0001]", "ok"),
        (b'"\\ud83d\\ude00"', "ok"),  # a pair is a character
        (b'"\\\\ud800"', "ok"),  # an escaped backslash, then text
        (b'"' + b"x" * 100 + b'"', "ok"),
    ],
)
def test_each_refusal_has_its_code(payload: bytes, code: str) -> None:
    assert code_of(payload) == code


def test_the_size_is_checked_before_anything_is_parsed() -> None:
    assert code_of(b"[" * 2000, max_bytes=1999) == "too-large"
    assert code_of(b"\xff" * 2000, max_bytes=1999) == "too-large"
    assert code_of(b"[" + b"1," * 99 + b"1]", max_bytes=201) == "ok"  # exactly the bound
    assert code_of(b"[" + b"1," * 99 + b"1]", max_bytes=200) == "too-large"
    assert code_of("é" * 100, max_bytes=199) == "too-large"  # bytes, not characters


def test_an_object_is_required_where_the_caller_says_so() -> None:
    assert code_of(b"[1]", obj=True) == "not-object"
    assert code_of(b'"x"', obj=True) == "not-object"
    assert code_of(b"null", obj=True) == "not-object"
    assert w.loads_object(b'{"a": [1, {"b": null}]}', max_bytes=100) == {"a": [1, {"b": None}]}
    assert w.loads(memoryview(b"[true]"), max_bytes=100) == [True]


# -- properties -------------------------------------------------------------------------

KEYS = st.text(alphabet=string.printable + 'é€😀[]{}"\\', max_size=8)
TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=20) | st.sampled_from(
    ['"', "\\", "[", "]", "{", "}", '\\"', '"[', "\\\\", '["]']
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63 - 1), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=40,
)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    return 0


def nest(value: Any, levels: int) -> Any:
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


@settings(max_examples=examples(400), deadline=None)
@given(VALUES, st.integers(0, 40), st.booleans())
def test_within_the_bounds_it_reads_what_the_standard_library_reads(
    value: Any, extra: int, ascii_only: bool
) -> None:
    value = nest(value, extra)
    text = json.dumps(value, ensure_ascii=ascii_only)
    if depth(value) > w.MAX_DEPTH:
        assert code_of(text.encode()) == "too-deep"
    else:
        assert w.loads(text.encode(), max_bytes=BIG) == json.loads(text)


@settings(max_examples=examples(400), deadline=None)
@given(VALUES, st.integers(0, 40), st.integers(0, 45))
def test_the_depth_scan_is_exact_on_json(value: Any, extra: int, limit: int) -> None:
    value = nest(value, extra)
    raw = json.dumps(value).encode()
    assert w.deeper_than(raw, limit) == (depth(value) > limit)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.binary(max_size=300)
    | st.text(max_size=100).map(lambda t: t.encode("utf-8", "surrogatepass"))
)
def test_any_bytes_give_a_value_or_a_code(raw: bytes) -> None:
    code = code_of(raw, max_bytes=200)
    if code == "ok":
        value = w.loads(raw, max_bytes=200)
        json.dumps(value, allow_nan=False).encode()  # whatever is accepted can be written out
        assert not any(isinstance(f, float) and not math.isfinite(f) for f in _leaves(value))


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(-(2**70), 2**70) | st.integers(-(2**64), 2**64), st.booleans())
def test_an_integer_is_read_exactly_within_the_bound_and_refused_beyond(
    n: int, in_list: bool
) -> None:
    raw = (f"[{n}]" if in_list else f'{{"units": {n}}}').encode()
    if abs(n) <= w.MAX_INT:
        assert w.loads(raw, max_bytes=BIG) == ([n] if in_list else {"units": n})
    else:
        assert code_of(raw) == "not-json"


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    return [value]
