"""JSON Schemas (draft 2020-12) of every link message, made from the message models.

The models (:mod:`progressived.link.core.models`) are the one source: pydantic writes each
model's schema, and this module only restates it in the plain form docs/link.md prints (every
part inline instead of ``$ref``, no titles, descriptions or defaults, ``null`` or an object
as ``oneOf``, the message's ``type`` as a ``const`` first). A keyword it does not know stops
it, so no rule of a model can be left out of its schema unnoticed.

docs/link.md prints them (``python -m progressived.link.core.schemas`` writes them as JSON);
tests check that the strict decoder and these schemas accept and refuse the same payloads.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter

from progressived.link.core import models as m

# The keywords a schema keeps, in the order docs/link.md prints them; and those it drops
# (words for people and the default, which a validator never reads).
_KEPT = (
    "type", "const", "enum", "oneOf", "additionalProperties", "required", "properties",
    "minimum", "maximum", "pattern", "maxLength", "maxItems", "items",
)  # fmt: skip
_DROPPED = frozenset({"title", "description", "default"})


def schema(cls: type[Any]) -> dict[str, Any]:
    """The JSON Schema of one message class."""
    written = TypeAdapter(cls).json_schema()
    body = _plain(written, written.get("$defs", {}))
    required = body.pop("required")
    properties = body.pop("properties")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": cls.type,
        **body,
        "required": ["type", *required],
        "properties": {"type": {"const": cls.type}, **properties},
    }


def _plain(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its references inlined, only the kept keywords, in their order."""
    if "$ref" in node:
        return _plain(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in node:  # an optional part: null or the part
        choices = [_plain(choice, defs) for choice in node["anyOf"]]
        return {"oneOf": sorted(choices, key=lambda choice: choice != {"type": "null"})}
    unknown = set(node) - set(_KEPT) - _DROPPED - {"$defs"}
    if unknown:
        raise ValueError(f"a schema keyword docs/link.md does not print: {sorted(unknown)}")
    out: dict[str, Any] = {}
    for key in _KEPT:
        if key not in node:
            continue
        value = node[key]
        if key == "properties":
            value = {name: _plain(part, defs) for name, part in value.items()}
        elif key == "items":
            value = _plain(value, defs)
        out[key] = value
    if "enum" in out:
        out.pop("type", None)  # the values say it
    return out


def all_schemas() -> dict[str, dict[str, Any]]:
    """Every message type's schema, table -> link first."""
    classes = [*m.TABLE_TYPES.values(), *m.LINK_TYPES.values()]
    return {cls.type: schema(cls) for cls in classes}


if __name__ == "__main__":  # pragma: no cover - documentation helper
    print(json.dumps(all_schemas(), indent=2))
