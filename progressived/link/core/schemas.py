"""JSON Schemas (draft 2020-12) of every link message, built from the message classes.

docs/link.md prints them (``python -m progressived.link.core.schemas`` writes them as JSON);
tests check that the strict decoder and these schemas accept and refuse the same payloads.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from typing import Any

from progressived.link.core import messages as m

_INT = {"type": "integer"}


def _range(low: int, high: int) -> dict[str, Any]:
    return {**_INT, "minimum": low, "maximum": high}


_ID = {"type": "string", "pattern": m.ID_PATTERN}
FIELDS: dict[str, dict[str, Any]] = {
    "seq": _range(0, m.MAX_SEQ),
    "lseq": _range(0, m.MAX_SEQ),
    "resend_from": _range(0, m.MAX_SEQ),
    "expect": _range(1, m.MAX_SEQ),
    "order": _range(0, m.MAX_SEQ),
    "epoch": _range(0, m.MAX_SEQ),
    "round": _range(0, m.MAX_SEQ),
    "seat": _range(1, 12),
    "count": _range(1, m.MAX_COUNT),
    "units": _range(0, m.MAX_UNITS),
    "share_of": _range(1, 64),
    "hash": {"type": "string", "pattern": m.HASH_PATTERN},
    "at": {"type": "string", "maxLength": 40},
    "reason": {"type": "string", "maxLength": 500},
    "code": {"type": "string", "maxLength": 40},
    "status": {"enum": list(m.STATUSES)},
    "state": {"enum": ["pending", "paid", "rejected"]},
}


def _object(cls: type[Any], kind: str | None) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    if kind is not None:
        props["type"] = {"const": kind}
        required.append("type")
    for f in fields(cls):
        if f.name == "head":
            props[f.name] = _object(m.Head, None)
        elif f.name == "award":
            props[f.name] = _object(m.Award, None)
        elif f.name == "hit":
            props[f.name] = {"oneOf": [{"type": "null"}, _object(m.Hit, None)]}
        elif f.name in ("wagers", "awards"):
            item = m.MeterWagers if f.name == "wagers" else m.Award
            props[f.name] = {"type": "array", "maxItems": 64, "items": _object(item, None)}
        else:
            props[f.name] = FIELDS.get(f.name, _ID)
        if f.default is MISSING and f.default_factory is MISSING:
            required.append(f.name)
    return {
        "type": "object",
        "additionalProperties": False,
        "required": required,
        "properties": props,
    }


def schema(cls: type[Any]) -> dict[str, Any]:
    """The JSON Schema of one message class (table sequences start at 1)."""
    out = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": cls.type}
    out.update(_object(cls, cls.type))
    if issubclass(cls, m.TableMessage):
        out["properties"]["seq"] = _range(1, m.MAX_SEQ)
    return out


def all_schemas() -> dict[str, dict[str, Any]]:
    """Every message type's schema, table -> link first."""
    classes = [*m.TABLE_TYPES.values(), *m.LINK_TYPES.values()]
    return {cls.type: schema(cls) for cls in classes}


if __name__ == "__main__":  # pragma: no cover - documentation helper
    print(json.dumps(all_schemas(), indent=2))
