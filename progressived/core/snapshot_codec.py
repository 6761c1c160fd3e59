"""The one codec of the ledgers' snapshots: canonical JSON out, strict JSON in.

Both ledgers keep snapshots of their state (the table's :mod:`progressived.ledger.snapshot`,
the link's :mod:`progressived.link.core.snapshot`) so that opening replays only the rows after
the latest one. A snapshot is read back into the state recovery starts from, so a reading
that guesses is worse than one that refuses: ``bool("false")`` is ``True`` and ``int(True)``
is ``1``. Here every value has exactly the JSON type its field says (a bool is ``true`` or
``false``, an integer is an integer and never a bool, a float or ``NaN`` is refused), every
object has exactly its known keys (an unknown key is refused, not ignored), and a fault is a
:class:`SnapshotError` whose message names the field (``awards[].confirmed: expected true or
false, got 'false'``).

The text written is the format both ledgers have stored since their first release (sorted
keys, no spaces, ASCII), so every existing ledger still opens
(tests/test_snapshot_codec.py opens ledgers written before this codec).

Pure: no I/O; the callers read the text from their ledger.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

__all__ = [
    "SnapshotError",
    "array",
    "boolean",
    "canonical",
    "fields",
    "integer",
    "mapping",
    "parse",
    "string",
    "tuple_of",
]


class SnapshotError(ValueError):
    """A snapshot this code cannot read (the message names the field and why)."""


_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False).encode


def canonical(data: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces, ASCII (the stored format)."""
    return _ENCODE(data)


def _no_float(text: str) -> object:
    raise SnapshotError(f"{text} is not an integer: a snapshot holds integers only")


def _no_constant(text: str) -> object:
    raise SnapshotError(f"{text} is not a JSON number")


def parse(text: str | bytes, *, format: int, kind: str | None = None) -> dict[str, Any]:
    """The snapshot's JSON object, after checking its ``format`` (and ``kind``, when the
    snapshot names one: the link's do, the table's do not)."""
    try:
        data = json.loads(text, parse_float=_no_float, parse_constant=_no_constant)
    except SnapshotError:
        raise
    except ValueError as exc:  # not JSON, not UTF-8
        raise SnapshotError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SnapshotError("a snapshot is a JSON object")
    if data.get("format") != format or (kind is not None and data.get("kind") != kind):
        wanted = f"a {kind} snapshot" if kind is not None else "a snapshot"
        found = f"format {data.get('format')!r}" + (
            f", kind {data.get('kind')!r}" if kind is not None else ""
        )
        raise SnapshotError(f"not {wanted} of format {format} ({found})")
    return data


def integer(value: object, where: str) -> int:
    """``value`` if it is a JSON integer (a bool is not one)."""
    if type(value) is not int:
        raise SnapshotError(f"{where}: expected an integer, got {value!r}")
    return value


def string(value: object, where: str) -> str:
    if type(value) is not str:
        raise SnapshotError(f"{where}: expected a string, got {value!r}")
    return value


def boolean(value: object, where: str) -> bool:
    if type(value) is not bool:
        raise SnapshotError(f"{where}: expected true or false, got {value!r}")
    return value


def array(value: object, where: str) -> list[Any]:
    if type(value) is not list:
        raise SnapshotError(f"{where}: expected an array, got {_kind(value)}")
    return value


def tuple_of(value: object, where: str, length: int) -> list[Any]:
    """An array of exactly ``length`` items (a record written as a list)."""
    items = array(value, where)
    if len(items) != length:
        raise SnapshotError(f"{where}: expected {length} items, got {len(items)}")
    return items


def fields(
    value: object, where: str, required: Collection[str], optional: Collection[str] = ()
) -> Mapping[str, Any]:
    """An object with every ``required`` key, and no key outside ``required`` and
    ``optional`` (a key this code does not know is refused, never ignored)."""
    if type(value) is not dict:
        raise SnapshotError(f"{where}: expected an object, got {_kind(value)}")
    missing = [k for k in required if k not in value]
    if missing:
        raise SnapshotError(f"{where}: missing {', '.join(sorted(missing))}")
    unknown = [k for k in value if k not in required and k not in optional]
    if unknown:
        raise SnapshotError(f"{where}: unknown key {', '.join(sorted(map(repr, unknown)))}")
    return value


def mapping(value: object, where: str) -> dict[str, Any]:
    """An object whose keys are data (accounts, tables, meters), not field names."""
    if type(value) is not dict:
        raise SnapshotError(f"{where}: expected an object, got {_kind(value)}")
    return value


def _kind(value: object) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "true or false"}.get(
        type(value), repr(value)
    )
