"""The archive's messages and topics (docs/archive.md): rows from a table, its head back.

Two topics per table, under the broker's prefix:

* ``<prefix>/archive/<table>/rows`` -- the table sends a run of its journal rows (QoS 1, not
  retained), in order, as its ledger holds them;
* ``<prefix>/archive/<table>/head`` -- the archive answers with the table's archived head
  (QoS 1, **retained**): the acknowledgement, and what the table resumes from after a
  restart.

Every payload from outside is read with the bounded decoder
(:mod:`progressived.core.wirejson`) and then field by field here: a payload that is not a
message of this protocol is refused with a code (:class:`ArchiveWireError`), never a
traceback. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from progressived.core import wirejson

MAX_MESSAGE = wirejson.MAX_MESSAGE  # 64 KiB: a table topic's bound (docs/mqtt.md)
MAX_ROWS = 500  # rows in one message
MAX_TEXT = 64  # characters of an id, an actor, a kind, a time
GENESIS = "0" * 64
CATEGORIES = ("engine", "system", "operator", "parameter")
MAX_SEQ = 2**53 - 1
ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
HASH = re.compile(r"^[0-9a-f]{64}$")
ROW_KEYS = (
    "seq",
    "at",
    "round",
    "seat",
    "kind",
    "category",
    "actor",
    "idem_key",
    "idem_last",
    "data",
    "prev_hash",
    "hash",
)
STATUSES = ("ok", "resend", "refused")

# The decoder's codes, as the archive reports them (the link's words for the same faults).
_WIRE_CODES = {"not-utf8": "bad-json", "not-json": "bad-json", "not-object": "bad-json"}


class ArchiveWireError(ValueError):
    """A payload that is not a message of the archive protocol; ``code`` says why."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason[:500]


def rows_topic(prefix: str, table: str) -> str:
    return f"{prefix}/archive/{table}/rows"


def head_topic(prefix: str, table: str) -> str:
    return f"{prefix}/archive/{table}/head"


def rows_filter(prefix: str) -> str:
    """What the archive subscribes to: every table's rows."""
    return f"{prefix}/archive/+/rows"


def table_of(prefix: str, topic: str) -> str | None:
    """The table a rows topic names, or None for any other topic."""
    head, sep, rest = topic.partition(f"{prefix}/archive/")
    if head or not sep:
        return None
    table, sep, tail = rest.partition("/")
    return table if sep and tail == "rows" and table else None


@dataclass(frozen=True, slots=True)
class Row:
    """One journal row as the table's ledger holds it (docs/ledger.md), plus the last row
    of the call its idempotency key covered (``idem_last``; ``None`` without a key)."""

    seq: int
    at: str
    round: int | None
    seat: int
    kind: str
    category: str
    actor: str
    idem_key: str | None
    idem_last: int | None
    data: str
    prev_hash: str
    hash: str

    def content(self, table: str) -> str:
        """The hashed text ``prev_hash|seq|at|table|round|seat|kind|category|actor|idem|data``."""
        rnd = "" if self.round is None else str(self.round)
        idem = "" if self.idem_key is None else self.idem_key
        return (
            f"{self.prev_hash}|{self.seq}|{self.at}|{table}|{rnd}|{self.seat}|{self.kind}|"
            f"{self.category}|{self.actor}|{idem}|{self.data}"
        )

    def to_wire(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in ROW_KEYS}


@dataclass(frozen=True, slots=True)
class RowsMessage:
    table: str
    rows: tuple[Row, ...]


@dataclass(frozen=True, slots=True)
class HeadMessage:
    """The archive's answer (retained): the table's archived head and how the last run of
    rows fared (``ok``, ``resend`` from ``seq + 1``, or ``refused`` with a ``code``)."""

    archive: str
    table: str
    seq: int
    hash: str
    status: str = "ok"
    code: str = ""
    reason: str = ""
    at: str = ""


def dumps(value: Mapping[str, Any]) -> str:
    """Canonical JSON: sorted keys, no spaces, ASCII."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def encode_rows(table: str, rows: Sequence[Row]) -> str:
    return dumps({"type": "rows", "table": table, "rows": [r.to_wire() for r in rows]})


def encode_head(head: HeadMessage) -> str:
    return dumps(
        {
            "type": "head",
            "archive": head.archive,
            "table": head.table,
            "seq": head.seq,
            "hash": head.hash,
            "status": head.status,
            "code": head.code,
            "reason": head.reason,
            "at": head.at,
        }
    )


def _object(payload: bytes | str) -> dict[str, Any]:
    try:
        return wirejson.loads_object(payload, max_bytes=MAX_MESSAGE)
    except wirejson.WireError as exc:
        raise ArchiveWireError(_WIRE_CODES.get(exc.code, exc.code), exc.reason) from None


def _keys(obj: Mapping[str, Any], keys: Sequence[str], what: str) -> None:
    unknown = sorted(set(obj) - set(keys))
    if unknown:
        raise ArchiveWireError("bad-field", f"{what}: unknown key {unknown[0][:40]!r}")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise ArchiveWireError("bad-field", f"{what}: missing key {missing[0]!r}")


def _int(obj: Mapping[str, Any], key: str, low: int, high: int = MAX_SEQ) -> int:
    value = obj[key]
    if type(value) is not int:
        raise ArchiveWireError("bad-type", f"{key} must be an integer")
    if not low <= value <= high:
        raise ArchiveWireError("out-of-range", f"{key} {value} is not within {low}..{high}")
    return value


def _text(obj: Mapping[str, Any], key: str, *, plain: bool = True, limit: int = MAX_TEXT) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise ArchiveWireError("bad-type", f"{key} must be a string")
    if len(value) > limit:
        raise ArchiveWireError("out-of-range", f"{key} is longer than {limit} characters")
    if plain and ("|" in value or "\n" in value or "\r" in value):
        raise ArchiveWireError("bad-field", f"{key} may not contain '|', CR or LF")
    return value


def _hash(obj: Mapping[str, Any], key: str) -> str:
    value = obj[key]
    if not isinstance(value, str) or HASH.match(value) is None:
        raise ArchiveWireError("bad-field", f"{key} is not 64 lower-case hex digits")
    return value


def _table(obj: Mapping[str, Any]) -> str:
    value = obj["table"]
    if not isinstance(value, str) or ID.match(value) is None:
        raise ArchiveWireError("bad-field", "table is not an id")
    return value


def _row(obj: Any, index: int) -> Row:
    if not isinstance(obj, dict):
        raise ArchiveWireError("bad-type", f"rows[{index}] must be an object")
    _keys(obj, ROW_KEYS, f"rows[{index}]")
    data = _text(obj, "data", plain=False, limit=MAX_MESSAGE)
    try:  # the stored JSON text exactly; it must be JSON (the ledger's CHECK)
        wirejson.loads(data, max_bytes=MAX_MESSAGE)
    except wirejson.WireError as exc:
        raise ArchiveWireError("bad-field", f"rows[{index}].data: {exc.reason}") from None
    if not data.isascii():
        raise ArchiveWireError("bad-field", f"rows[{index}].data is not ASCII JSON")
    category = _text(obj, "category")
    if category not in CATEGORIES:
        raise ArchiveWireError("bad-field", f"rows[{index}].category {category[:40]!r}")
    kind, at = _text(obj, "kind"), _text(obj, "at")
    if not kind or not at:
        raise ArchiveWireError("bad-field", f"rows[{index}]: kind and at may not be empty")
    idem = obj["idem_key"]
    idem_key = None if idem is None else _text(obj, "idem_key", limit=200)
    if idem_key == "":
        raise ArchiveWireError("bad-field", f"rows[{index}].idem_key may not be empty")
    last = obj["idem_last"]
    if (idem_key is None) != (last is None):
        raise ArchiveWireError("bad-field", f"rows[{index}]: idem_last goes with idem_key")
    return Row(
        seq=_int(obj, "seq", 1),
        at=at,
        round=None if obj["round"] is None else _int(obj, "round", 0),
        seat=_int(obj, "seat", 0, 1000),
        kind=kind,
        category=category,
        actor=_text(obj, "actor"),
        idem_key=idem_key,
        idem_last=None if last is None else _int(obj, "idem_last", 0),
        data=data,
        prev_hash=_hash(obj, "prev_hash"),
        hash=_hash(obj, "hash"),
    )


def decode_rows(payload: bytes | str) -> RowsMessage:
    """A table's run of rows, or :class:`ArchiveWireError` with the first fault's code."""
    obj = _object(payload)
    _keys(obj, ("type", "table", "rows"), "message")
    if obj["type"] != "rows":
        raise ArchiveWireError("bad-field", "type must be rows")
    table = _table(obj)
    rows = obj["rows"]
    if not isinstance(rows, list):
        raise ArchiveWireError("bad-type", "rows must be a list")
    if not 1 <= len(rows) <= MAX_ROWS:
        raise ArchiveWireError("out-of-range", f"rows holds 1 to {MAX_ROWS} rows")
    return RowsMessage(table, tuple(_row(r, i) for i, r in enumerate(rows)))


def decode_head(payload: bytes | str) -> HeadMessage:
    """The archive's retained answer, or :class:`ArchiveWireError`."""
    obj = _object(payload)
    keys = ("type", "archive", "table", "seq", "hash", "status", "code", "reason", "at")
    _keys(obj, keys, "message")
    if obj["type"] != "head":
        raise ArchiveWireError("bad-field", "type must be head")
    status = obj["status"]
    if status not in STATUSES:
        raise ArchiveWireError("bad-field", "status must be ok, resend or refused")
    archive = obj["archive"]
    if not isinstance(archive, str) or ID.match(archive) is None:
        raise ArchiveWireError("bad-field", "archive is not an id")
    return HeadMessage(
        archive=archive,
        table=_table(obj),
        seq=_int(obj, "seq", 0),
        hash=_hash(obj, "hash"),
        status=status,
        code=_text(obj, "code", limit=40),
        reason=_text(obj, "reason", plain=False, limit=500),
        at=_text(obj, "at", limit=40),
    )
