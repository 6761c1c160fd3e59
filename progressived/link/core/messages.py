"""The link message protocol: the messages, their topics and their strict JSON form.

Tables speak to the link controller that owns a linked meter; the broker between them
carries messages but is never trusted with money (it may lose, repeat, reorder them).
So every table message carries its table id, a gapless per-table sequence number, the id
the table's ledger records for it, and the table ledger's head (seq, hash) for the link to
witness; every link message carries the link ledger's head for the table to witness.

The messages are models (:mod:`progressived.link.core.models`, re-exported here): their
fields' types are the protocol's rules, and the JSON Schemas are made from them too
(:mod:`progressived.link.core.schemas`). Decoding is strict: bytes are read by
:mod:`progressived.core.wirejson` (bounded in size and depth, UTF-8, no duplicate keys, no
NaN), ``type`` picks the model, and the model refuses unknown or missing keys, wrong types
(a bool is not an int) and values out of range. The first fault in the order a message is
written -- an object's unknown keys before its fields, a list's length before its entries,
a table message's ``seq`` of 0 after everything else -- is the :class:`MessageError`,
with its code and a reason naming the field. Nothing here does I/O; docs/link.md is the
contract.

Micro-benchmark: ``python -m bench.link_decode`` (each payload shape decoded, best of
several runs; docs/performance.md, "Micro-benchmarks").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import fields, is_dataclass
from json.encoder import encode_basestring_ascii as _q
from typing import Any, TypeVar, get_type_hints

from pydantic import TypeAdapter, ValidationError

from progressived.core.wirejson import WireError, loads_object
from progressived.link.core.models import (
    AWARD_STATES,
    HASH_PATTERN,
    ID_PATTERN,
    LINK_TYPES,
    MAX_COUNT,
    MAX_ITEMS,
    MAX_REASON,
    MAX_SEQ,
    MAX_UNITS,
    STATUSES,
    TABLE_TYPES,
    Award,
    AwardUpdate,
    Claim,
    ClaimConfirm,
    ClaimReject,
    Contribution,
    Heartbeat,
    Hit,
    LedgerHead,
    LinkedMeter,
    LinkMessage,
    MeterWagers,
    Result,
    Reversal,
    TableMessage,
)

__all__ = [
    "AWARD_STATES", "HASH_PATTERN", "ID_PATTERN", "LINK_TYPES", "MAX_COUNT", "MAX_ITEMS",
    "MAX_PAYLOAD", "MAX_REASON", "MAX_SEQ", "MAX_UNITS", "STATUSES", "TABLE_TYPES", "Award",
    "AwardUpdate", "Claim", "ClaimConfirm", "ClaimReject", "Contribution", "Heartbeat", "Hit",
    "LedgerHead", "LinkMessage", "LinkedMeter", "MessageError", "MeterWagers", "Result", "Reversal",
    "TableMessage", "build", "decode_link", "decode_table", "encode", "from_table_topic",
    "meter_topic", "table_of_topic", "to_dict", "to_table_topic",
]  # fmt: skip

M = TypeVar("M")
MAX_PAYLOAD = 16 * 1024  # bytes; the largest valid message is far below this
_ID = re.compile(ID_PATTERN)


class MessageError(ValueError):
    """A payload that is not a valid link message; ``code`` is a stable machine-readable tag."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


# -- topics -------------------------------------------------------------------------------


def from_table_topic(prefix: str, link: str, table: str) -> str:
    """Table -> link (only that table writes it; ACL ``pattern write .../from/%u``)."""
    return f"{prefix}/link/{link}/from/{table}"


def to_table_topic(prefix: str, link: str, table: str) -> str:
    """Link -> one table: results, award updates, heartbeats (only the link writes it)."""
    return f"{prefix}/link/{link}/to/{table}"


def meter_topic(prefix: str, link: str, meter: str) -> str:
    """The linked meter, retained (only the link writes it; everyone may read)."""
    return f"{prefix}/link/{link}/meter/{meter}"


def table_of_topic(prefix: str, link: str, topic: str) -> str | None:
    """The table id a ``from`` topic names, or ``None`` if the topic is not one."""
    head = f"{prefix}/link/{link}/from/"
    if not topic.startswith(head):
        return None
    table = topic[len(head) :]
    return table if _ID.fullmatch(table) else None


# -- encoding -----------------------------------------------------------------------------


_NAMES: dict[type, tuple[str, ...]] = {}  # field names per message class (fields() is slow)


def to_dict(message: object) -> dict[str, Any]:
    """The JSON object of a message (``type`` first, nested values as objects/lists)."""
    out: dict[str, Any] = {}
    kind = getattr(message, "type", None)
    if isinstance(kind, str) and kind:
        out["type"] = kind
    cls = type(message)
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in fields(message))  # type: ignore[arg-type]
    for name in names:
        value = getattr(message, name)
        # the usual case first: a plain string or integer (not a bool: _plain keeps those)
        out[name] = value if type(value) in _SCALARS else _plain(value)
    return out


_SCALARS = (str, int)


def _plain(value: object) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int)):
        return value
    return to_dict(value)


def encode(message: object) -> bytes:
    """Canonical UTF-8 JSON (sorted keys, no spaces): equal messages give equal bytes."""
    if type(message) is Result:
        return _result_bytes(message)
    if type(message) is Contribution:
        return _contribution_bytes(message)
    return json.dumps(to_dict(message), sort_keys=True, separators=(",", ":")).encode()


def _result_bytes(r: Result) -> bytes:
    """``encode(r)`` written out: a result is encoded for every message the link answers,
    once for the reply and once for its ledger row (docs/performance.md, "The link"). The
    same bytes as the generic path (tests/test_link_messages.py compares them)."""
    awards = ",".join(
        f'{{"claim":{_q(a.claim)},"hand":{_q(a.hand)},"meter":{_q(a.meter)},"order":{a.order},'
        f'"share_of":{a.share_of},"state":{_q(a.state)},"units":{a.units}}}'
        for a in r.awards
    )
    return (
        f'{{"awards":[{awards}],"code":{_q(r.code)},'
        f'"head":{{"hash":{_q(r.head.hash)},"seq":{r.head.seq}}},"id":{_q(r.id)},'
        f'"link":{_q(r.link)},"lseq":{r.lseq},"reason":{_q(r.reason)},'
        f'"resend_from":{r.resend_from},"seq":{r.seq},"status":{_q(r.status)},'
        f'"table":{_q(r.table)},"type":"result"}}'
    ).encode()

def _contribution_bytes(c: Contribution) -> bytes:
    """``encode(c)`` written out: the book encodes every table message it receives (its
    canonical bytes are journaled and their digest answers a repeat), and contributions are
    nearly all of them (docs/performance.md, "The link"). The same bytes as the generic path
    (tests/test_link_messages.py compares them)."""
    wagers = ",".join(
        f'{{"count":{w.count},"meter":{_q(w.meter)},"units":{w.units}}}' for w in c.wagers
    )
    return (
        f'{{"at":{_q(c.at)},"head":{{"hash":{_q(c.head.hash)},"seq":{c.head.seq}}},'
        f'"id":{_q(c.id)},"round":{c.round},"seq":{c.seq},"table":{_q(c.table)},'
        f'"type":"contribution","wagers":[{wagers}]}}'
    ).encode()


# The wire decoder's codes as this protocol has always named them (docs/link.md, "Refusal
# codes"): a payload that is not a JSON object is ``bad-json``, whatever the reason.
_WIRE_CODES = {"too-large": "too-large", "too-deep": "too-deep"}


def _parse(payload: bytes | str) -> dict[str, Any]:
    try:
        return loads_object(payload, max_bytes=MAX_PAYLOAD)
    except WireError as exc:
        raise MessageError(_WIRE_CODES.get(exc.code, "bad-json"), exc.reason) from None


def decode_table(payload: bytes | str) -> TableMessage:
    """A table -> link message, or :class:`MessageError` saying exactly what is wrong."""
    message = _build(_parse(payload), TABLE_TYPES)
    assert isinstance(message, TableMessage)
    return message


def decode_link(payload: bytes | str) -> LinkMessage:
    """A link -> table message (results, award updates, heartbeats, the linked meter)."""
    message = _build(_parse(payload), LINK_TYPES)
    assert isinstance(message, Result | AwardUpdate | Heartbeat | LinkedMeter)
    return message


_VALIDATORS: dict[type, TypeAdapter[Any]] = {
    cls: TypeAdapter(cls) for cls in (*TABLE_TYPES.values(), *LINK_TYPES.values())
}
Fault = Mapping[str, Any]  # one of pydantic's errors: type, loc, msg, input, ctx
_RANGE = frozenset({"greater_than_equal", "less_than_equal"})  # an integer's bounds
_UNKNOWN = "unexpected_keyword_argument"  # a key that is no field (extra="forbid")


def _build(data: dict[str, Any], types: Mapping[str, type[Any]]) -> object:
    kind = data.pop("type", None)
    if not isinstance(kind, str) or kind not in types:
        raise MessageError("bad-type", f"unknown message type {_brief(kind)}")
    return build(types[kind], data)


def build(cls: type[M], data: Mapping[str, Any]) -> M:
    """``data`` (a JSON object, its ``type`` taken out) as a message of ``cls``, validated
    as a payload is, or :class:`MessageError` (a stored message read back, too)."""
    try:
        message: M = _VALIDATORS[cls].validate_python(data)
    except ValidationError as exc:
        faults = exc.errors(include_url=False)
    else:
        return message
    first = min(faults, key=lambda fault: _place(cls, fault))
    ranged = first["type"] in _RANGE
    raise MessageError("out-of-range" if ranged else "bad-field", _reason(cls, first, faults))


def _place(cls: type[Any], fault: Fault) -> tuple[int, ...]:
    """Where a fault sits in the order a message is read: each step of its location as the
    field's position in its model (a key that is no field: -1, before them all) or as the
    list index. A table message's ``seq`` of 0 comes after everything (the protocol always
    read the envelope's range first and whether a sequence starts at 1 last)."""
    loc = fault["loc"]
    if loc == ("seq",) and fault["type"] == "greater_than_equal" and fault["input"] == 0:
        return (len(_names(cls)),)
    place: list[int] = []
    model: type[Any] | None = cls
    for step in loc:
        if isinstance(step, int):
            place.append(step)
            continue
        names = _names(model) if model is not None else ()
        if model is None or step not in names:
            place.append(-1)
            break
        place.append(names.index(step))
        model = _part(model, step)
    return tuple(place)


_PARTS: dict[tuple[type, str], type | None] = {}


def _names(cls: type[Any]) -> tuple[str, ...]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _part(cls: type[Any], name: str) -> type | None:
    """The model a field holds (alone, in a list or optional), or ``None`` for a value."""
    if (cls, name) not in _PARTS:
        pending: list[Any] = [get_type_hints(cls)[name]]
        found = None
        while pending and found is None:
            kind = pending.pop()
            found = kind if isinstance(kind, type) and is_dataclass(kind) else None
            pending.extend(getattr(kind, "__args__", ()))
        _PARTS[(cls, name)] = found
    return _PARTS[(cls, name)]


def _reason(cls: type[Any], first: Fault, faults: Sequence[Fault]) -> str:
    """The refusal's reason: the field's path and what is wrong with it, in a few words
    (keys and values from outside are cut to 40 characters)."""
    loc = first["loc"]
    where = getattr(cls, "type", "") or cls.__name__
    where += "".join(f"[{s}]" if isinstance(s, int) else f".{_cut(s)}" for s in loc[:-1])
    name = loc[-1] if loc else ""
    path = where + (f"[{name}]" if isinstance(name, int) else f".{_cut(name)}")
    match first["type"]:
        case "unexpected_keyword_argument":
            here = [f for f in faults if f["type"] == _UNKNOWN and f["loc"][:-1] == loc[:-1]]
            unknown = sorted(str(f["loc"][-1]) for f in here)
            return f"{where}: unknown key(s) {', '.join(_cut(k) for k in unknown[:5])}"
        case "missing":
            return f"{path}: missing"
        case "int_type":
            return f"{path}: expected an integer, got {_brief(first['input'])}"
        case "greater_than_equal":
            return f"{path}: {first['input']} is below {first.get('ctx', {}).get('ge')}"
        case "less_than_equal":
            return f"{path}: {first['input']} is above {first.get('ctx', {}).get('le')}"
    return f"{path}: {first['msg'][:200]}"


def _cut(name: str | int) -> str:
    text = str(name)
    return text if len(text) <= 40 else text[:37] + "..."


def _brief(value: object) -> str:
    """A value as a refusal's reason quotes it: at most 40 characters (a reason is at most
    MAX_REASON, and the value came from outside)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
