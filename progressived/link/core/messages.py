"""The link message protocol: typed messages and their strict JSON form.

Tables speak to the link controller that owns a linked meter; the broker between them
carries messages but is never trusted with money (it may lose, repeat, reorder them).
So every table message carries its table id, a gapless per-table sequence number, the id
the table's ledger records for it, and the table ledger's head (seq, hash) for the link to
witness; every link message carries the link ledger's head for the table to witness.

Decoding is strict: bytes are read by :mod:`progressived.core.wirejson` (bounded in size and
depth, UTF-8, no duplicate keys, no NaN), then unknown or missing keys, wrong types (a bool
is not an int) and values out of range are refused with a :class:`MessageError` naming the
problem. Nothing here does I/O; docs/link.md is the contract.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from json.encoder import encode_basestring_ascii as _q
from typing import Any, ClassVar

from progressived.core.wirejson import WireError, loads_object

MAX_PAYLOAD = 16 * 1024  # bytes; the largest valid message is far below this
MAX_SEQ = 2**53 - 1  # JSON-safe integers only
MAX_UNITS = 10**15  # one billion dollars in units: more is a bad payload, not a wager
MAX_COUNT = 1000  # wagers of one table on one meter in one LOCK
MAX_REASON = 500  # characters of a result's reason
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
HASH_PATTERN = r"^[0-9a-f]{64}$"
_ID = re.compile(ID_PATTERN)
_HASH = re.compile(HASH_PATTERN)
STATUSES = ("applied", "refused", "resend")


class MessageError(ValueError):
    """A payload that is not a valid link message; ``code`` is a stable machine-readable tag."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Head:
    """A ledger's head: the last journal row's sequence number and its chain hash."""

    seq: int
    hash: str


@dataclass(frozen=True, slots=True)
class MeterWagers:
    """Wagers locked on one linked meter: how many, and their total in units."""

    meter: str
    count: int
    units: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TableMessage:
    """Envelope of every table -> link message."""

    type: ClassVar[str] = ""
    table: str
    seq: int
    id: str
    head: Head
    at: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Contribution(TableMessage):
    """One LOCK's wagers on the linked meters (one entry per meter, each meter once)."""

    type: ClassVar[str] = "contribution"
    round: int
    wagers: tuple[MeterWagers, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim(TableMessage):
    """A meter hand keyed at the table: price it at its place in the link's log."""

    type: ClassVar[str] = "claim"
    claim: str
    round: int
    seat: int
    hand: str
    meter: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimConfirm(TableMessage):
    """The supervisor confirmed the claim: the link posts it as paid."""

    type: ClassVar[str] = "claim_confirm"
    claim: str
    by: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimReject(TableMessage):
    """The supervisor rejected the claim: the link restores the meter."""

    type: ClassVar[str] = "claim_reject"
    claim: str
    by: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Reversal(TableMessage):
    """The round of an earlier contribution was voided; ``of`` is that message's ``id``."""

    type: ClassVar[str] = "reversal"
    of: str
    round: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Award:
    """A claim's standing at the link: its units, place in the log, and split share."""

    claim: str
    meter: str
    hand: str
    units: int
    order: int  # the link log position that priced it (orders claims across tables)
    share_of: int  # claims sharing one award (split policy); 1 when alone
    state: str  # pending | paid | rejected


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """The link's answer to one table message (stored; a repeat gets the same one)."""

    type: ClassVar[str] = "result"
    link: str
    table: str
    seq: int  # the table message answered
    id: str
    status: str  # applied | refused | resend
    code: str  # "ok" or a refusal tag
    reason: str
    resend_from: int  # with status "resend": the next sequence the link expects; else 0
    lseq: int  # link log position of the effect (0 when nothing was applied)
    head: Head
    awards: tuple[Award, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AwardUpdate:
    """Unsolicited: a claim's award changed (a split group gained or lost a member)."""

    type: ClassVar[str] = "award"
    link: str
    table: str
    lseq: int
    head: Head
    award: Award


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat:
    """The link is alive; ``expect`` is the next sequence it wants from this table."""

    type: ClassVar[str] = "heartbeat"
    link: str
    table: str
    expect: int
    lseq: int
    head: Head
    at: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    """The last hit on a linked meter, for the common sign (asset id, seat, hand, amount)."""

    table: str
    seat: int
    hand: str
    units: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkedMeter:
    """The linked meter as every sign shows it (retained; only the link publishes it)."""

    type: ClassVar[str] = "meter"
    link: str
    meter: str
    units: int
    epoch: int  # rises at every claim and restore; a sign never shows an older (epoch, lseq)
    lseq: int
    head: Head
    hit: Hit | None = None


TABLE_TYPES: dict[str, type[TableMessage]] = {
    cls.type: cls for cls in (Contribution, Claim, ClaimConfirm, ClaimReject, Reversal)
}
LinkMessage = Result | AwardUpdate | Heartbeat | LinkedMeter
LINK_TYPES: dict[str, type[Any]] = {
    cls.type: cls for cls in (Result, AwardUpdate, Heartbeat, LinkedMeter)
}
_NESTED: dict[str, type[Any]] = {"head": Head, "hit": Hit, "award": Award}
_LISTS: dict[str, type[Any]] = {"wagers": MeterWagers, "awards": Award}


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
    if message.seq < 1:
        raise MessageError("out-of-range", f"{message.type}.seq: sequences start at 1")
    return message


def decode_link(payload: bytes | str) -> LinkMessage:
    """A link -> table message (results, award updates, heartbeats, the linked meter)."""
    message = _build(_parse(payload), LINK_TYPES)
    assert isinstance(message, (Result, AwardUpdate, Heartbeat, LinkedMeter))
    return message


def _build(data: dict[str, Any], types: Mapping[str, type[Any]]) -> object:
    kind = data.pop("type", None)
    if not isinstance(kind, str) or kind not in types:
        raise MessageError("bad-type", f"unknown message type {_brief(kind)}")
    return _object(types[kind], data, kind)


def _object(cls: type[Any], data: object, where: str) -> object:
    if not isinstance(data, dict):
        raise MessageError("bad-field", f"{where}: expected an object")
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in fields(cls))
    if not data.keys() <= set(names):
        unknown = sorted(set(data) - set(names))
        raise MessageError("bad-field", f"{where}: unknown key(s) {', '.join(unknown)}")
    values: dict[str, object] = {}
    for name in names:
        path = f"{where}.{name}"
        if name not in data:
            if name in ("hit", "awards"):
                continue  # optional, with defaults
            raise MessageError("bad-field", f"{path}: missing")
        values[name] = _field(name, data[name], path)
    return cls(**values)


def _field(name: str, value: object, path: str) -> object:
    if name in _NESTED:
        if name == "hit" and value is None:
            return None
        return _object(_NESTED[name], value, path)
    if name in _LISTS:
        if not isinstance(value, list) or len(value) > 64:
            raise MessageError("bad-field", f"{path}: expected a list of at most 64")
        return tuple(_object(_LISTS[name], v, f"{path}[{i}]") for i, v in enumerate(value))
    check = _CHECKS.get(name, _identifier)
    check(value, path)
    return value


def _integer(low: int, high: int) -> Callable[[object, str], None]:
    def check(value: object, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise MessageError("bad-field", f"{path}: expected an integer, got {_brief(value)}")
        if not low <= value <= high:
            raise MessageError("out-of-range", f"{path}: {value} is not in {low}..{high}")

    return check


def _brief(value: object) -> str:
    """A value as a refusal's reason quotes it: at most 40 characters (a reason is at most
    MAX_REASON, and the value came from outside)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _identifier(value: object, path: str) -> None:
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise MessageError("bad-field", f"{path}: expected an id matching {ID_PATTERN}")


def _text(limit: int) -> Callable[[object, str], None]:
    def check(value: object, path: str) -> None:
        if not isinstance(value, str) or len(value) > limit:
            raise MessageError("bad-field", f"{path}: expected a string of at most {limit}")

    return check


def _hash(value: object, path: str) -> None:
    if not isinstance(value, str) or not _HASH.fullmatch(value):
        raise MessageError("bad-field", f"{path}: expected 64 lowercase hex digits")


def _one_of(*allowed: str) -> Callable[[object, str], None]:
    def check(value: object, path: str) -> None:
        if value not in allowed:
            raise MessageError("bad-field", f"{path}: expected one of {', '.join(allowed)}")

    return check


_CHECKS: dict[str, Callable[[object, str], None]] = {
    "seq": _integer(0, MAX_SEQ),
    "lseq": _integer(0, MAX_SEQ),
    "resend_from": _integer(0, MAX_SEQ),
    "expect": _integer(1, MAX_SEQ),
    "order": _integer(0, MAX_SEQ),
    "epoch": _integer(0, MAX_SEQ),
    "round": _integer(0, MAX_SEQ),
    "seat": _integer(1, 12),
    "count": _integer(1, MAX_COUNT),
    "units": _integer(0, MAX_UNITS),
    "share_of": _integer(1, 64),
    "hash": _hash,
    "at": _text(40),
    "reason": _text(MAX_REASON),
    "code": _text(40),
    "status": _one_of(*STATUSES),
    "state": _one_of("pending", "paid", "rejected"),
}
