"""One bounded JSON decoder for bytes that come from outside the process.

Whatever arrives over a network or a socket is hostile: a 3,000-byte array nested 1,500
deep makes the standard library's decoder raise ``RecursionError`` (not ``ValueError``),
a 5,000-digit integer raises ``ValueError`` in the middle of a parse, ``NaN`` and ``1e400``
decode to floats no JSON peer can read back, ``{"a": 1, "a": 2}`` silently keeps one of
two values, and ``"\\ud800"`` decodes to a string that cannot be written out again. Every
decoder of outside bytes (the link's messages, the table's link adapter, the signs, the
control socket, the testing subscriber) goes through :func:`loads`, which either returns a
value or raises :class:`WireError` with a short machine code:

``too-large``
    more bytes than the caller's bound (checked before anything is parsed);
``too-deep``
    arrays and objects nested deeper than ``max_depth`` (default :data:`MAX_DEPTH`),
    found by a linear scan before the parser runs, so the parser never recurses far;
``not-utf8``
    the bytes are not UTF-8;
``not-json``
    not JSON text, or JSON this product never accepts: a duplicate key in one object,
    ``NaN``/``Infinity`` (or a float too large to be finite), an integer beyond
    :data:`MAX_INT` in magnitude, a ``\\u`` escape that is not a character (a lone
    surrogate);
``not-object``
    :func:`loads_object` only: the top level is not an object.

The parser is the standard library's (C) decoder, with its ``object_pairs_hook`` refusing
duplicate keys. pydantic-core's ``from_json`` (jiter), already a dependency, was measured
as the alternative: it stops at a fixed depth of about 200, but keeps the last of two equal
keys and reads ``1e400`` as ``inf`` even with ``allow_inf_nan=False``; orjson is not a
dependency (and its ``loads`` had no depth limit before 3.9.15). docs/performance.md,
"The link", has what the checks cost on the link's hot path.

Micro-benchmark: ``python -m bench.link_decode`` (this decoder and the link's models behind
it, per payload; docs/performance.md, "Micro-benchmarks").
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any

MAX_DEPTH = 32  # nested arrays/objects: far more than anything the product sends
MAX_INT = 2**63 - 1  # the largest integer magnitude accepted (money is bounded further)
MAX_MESSAGE = 64 * 1024  # bytes of one message on a table's topics (docs/mqtt.md)
CODES = ("too-large", "too-deep", "not-utf8", "not-json", "not-object")
_WORDS = {
    "too-large": "too large",
    "too-deep": "nested too deep",
    "not-utf8": "not UTF-8",
    "not-json": "not JSON",
    "not-object": "not a JSON object",
}

_DEPTH_STEP = [0] * 256  # +1 for an opening bracket, -1 for a closing one (as ``[]``)
_DEPTH_STEP[ord("[")], _DEPTH_STEP[ord("]")] = 1, -1
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")
_AS_BRACKETS = bytes.maketrans(b"{}", b"[]")
_MAX_INT_DIGITS = len(str(MAX_INT)) + 1  # a sign and the digits


def _number_shape() -> bytes:
    """A ``bytes.translate`` table: digits to 0, an exponent's e/E to e, a sign to +, any
    other byte to a space (where a number could leave the bounds shows as a pattern)."""
    table = bytearray(b" " * 256)
    for chars, shape in ((b"0123456789", "0"), (b"eE", "e"), (b"+-", "+")):
        for c in chars:
            table[c] = ord(shape)
    return bytes(table)


_NUMBER_SHAPE = _number_shape()
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class WireError(ValueError):
    """Outside bytes that are not acceptable JSON; ``code`` is one of :data:`CODES` (a
    reader around the decoder may add its own, e.g. the control socket's ``timeout``)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason

    @property
    def words(self) -> str:
        """The refusal in a few words for a screen or a log line (``not JSON``)."""
        return _WORDS.get(self.code, self.code)


Payload = bytes | bytearray | memoryview | str


def loads(payload: Payload, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of ``payload``, or :class:`WireError` saying why not (never anything
    else: no ``RecursionError``, no ``UnicodeDecodeError``, no partial value)."""
    raw = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else bytes(payload)
    if len(raw) > max_bytes:
        raise WireError("too-large", f"{len(raw)} bytes (at most {max_bytes})")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireError("not-utf8", f"invalid UTF-8 at byte {exc.start}") from None
    if deeper_than(raw, max_depth):
        raise WireError("too-deep", f"nested deeper than {max_depth} arrays/objects")
    # Numbers are checked one by one (a Python call each) only where one could be out of
    # bounds: 19 digits in a row, or a 3-digit exponent. Elsewhere the C parser's own int()
    # and float() cannot leave the bounds, and 16 KiB of small numbers stays cheap.
    shape = raw.translate(_NUMBER_SHAPE)
    risky = b"0" * 19 in shape or b"e000" in shape or b"e+000" in shape
    try:
        value = (_CHECKING if risky else _DECODER).decode(text)
    except WireError:
        raise
    except RecursionError:  # unreachable after the scan; kept so no parse can end a task
        raise WireError("too-deep", f"nested deeper than {max_depth} arrays/objects") from None
    except ValueError as exc:
        raise WireError("not-json", _short(exc)) from None
    if "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None:
        _no_lone_surrogate(value)
    return value


def loads_object(payload: Payload, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """:func:`loads`, for payloads that must be a JSON object (``not-object`` otherwise)."""
    value = loads(payload, max_bytes=max_bytes, max_depth=max_depth)
    if not isinstance(value, dict):
        raise WireError("not-object", f"a JSON object is expected, not {_kind(value)}")
    return value


def deeper_than(raw: bytes, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` deep in ``raw``: no recursion,
    linear in the size, at C speed (bytes methods), exact for valid JSON (the parser refuses
    the rest: it stops at its first error, never deeper than this allowed).

    No more opening brackets than ``limit`` cannot nest deeper: a normal message costs two
    ``bytes.count``. Otherwise the escapes are removed (``\\\\`` then ``\\"``, pairing
    backslashes left to right as JSON does), the strings (between quotes) dropped, and what
    is left reduced to its brackets, ``{}`` written as ``[]`` (only the depth matters here).
    A run of more than ``limit`` openers is too deep at once (the 1,500-deep array); else
    each pass removes every innermost ``[]``, one level: empty within ``limit`` passes is
    shallow enough. A string no pass can reduce (unbalanced) is measured step by step.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(unescaped.split(b'"')[::2]).translate(_AS_BRACKETS, _NOT_BRACKET)
    if b"[" * (limit + 1) in brackets:
        return True
    left = brackets
    for _ in range(limit):
        if not left:
            return False
        fewer = left.replace(b"[]", b"")
        if len(fewer) == len(left):
            break  # unbalanced: no pass can empty it
        left = fewer
    else:
        return bool(left)
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0) > limit


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise WireError("not-json", f"duplicate key {key[:40]!r}")
            seen.add(key)
    return out


def _no_constant(name: str) -> Any:
    raise WireError("not-json", f"{name} is not a JSON number")


def _bounded_int(text: str) -> int:
    if len(text) > _MAX_INT_DIGITS or abs(value := int(text)) > MAX_INT:
        raise WireError("not-json", f"an integer beyond +/-{MAX_INT} ({len(text)} characters)")
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise WireError("not-json", f"the number {text[:40]} is too large for a float")
    return value


# Built once: json.loads(text, hook=...) builds a decoder per call (a microsecond each).
_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
_CHECKING = json.JSONDecoder(
    object_pairs_hook=_no_duplicates,
    parse_constant=_no_constant,
    parse_int=_bounded_int,
    parse_float=_finite_float,
)


def _no_lone_surrogate(value: object) -> None:
    """Refuse a ``\\u`` escape that is no character: it could not be written out again."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise WireError(
            "not-json", "a \\u escape that is not a character (lone surrogate)"
        ) from None


def _short(exc: ValueError) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:200] + "..."


def _kind(value: object) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
