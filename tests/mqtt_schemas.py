"""The JSON Schemas of docs/mqtt.md, read from the doc itself (a sign vendor's only source).

Each ```json block with a ``$schema`` key is one schema, named by its ``title``.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

from tests.conftest import ROOT

MQTT_DOC = ROOT / "docs" / "mqtt.md"


@cache
def doc_schemas() -> dict[str, Draft202012Validator]:
    found: dict[str, Draft202012Validator] = {}
    for block in re.findall(r"```json\n(.*?)```", MQTT_DOC.read_text(), flags=re.DOTALL):
        data = json.loads(block)
        if "$schema" not in data:
            continue
        Draft202012Validator.check_schema(data)
        found[data["title"]] = Draft202012Validator(data, format_checker=FormatChecker())
    return found


def documented_event_kinds() -> set[str]:
    """The kinds the event schema knows (``$defs.known_kinds``; any other kind is open)."""
    schema = doc_schemas()["event"].schema
    return set(schema["$defs"]["known_kinds"]["enum"])


def schema_for_topic(topic: str) -> str | None:
    """``meter``, ``status`` or ``event`` for a topic under ``progressive/table/<id>/``."""
    parts = topic.split("/")
    if len(parts) == 5 and parts[:2] == ["progressive", "table"] and parts[3] == "meter":
        return "meter"
    if (
        len(parts) == 4
        and parts[:2] == ["progressive", "table"]
        and parts[3] in ("status", "event")
    ):
        return parts[3]
    return None


def problems(topic: str, message: Any) -> list[str]:
    """Why a published message does not match docs/mqtt.md (empty when it does); the
    archive's topics (docs/archive.md) are read by the archive's own decoder."""
    if topic.startswith("progressive/archive/"):
        return archive_problems(topic, message)
    title = schema_for_topic(topic)
    if title is None:
        return [f"{topic}: not a documented topic"]
    return [
        f"{topic}: {error.message} in {message}"
        for error in doc_schemas()[title].iter_errors(message)
    ]


def archive_problems(topic: str, message: Any) -> list[str]:
    """A table's rows or the archive's head, as docs/archive.md says they are."""
    import json

    from progressived.archive.core import wire

    decode = wire.decode_rows if topic.endswith("/rows") else wire.decode_head
    if not topic.endswith(("/rows", "/head")):
        return [f"{topic}: not a documented topic"]
    try:
        decode(json.dumps(message))
    except wire.ArchiveWireError as exc:
        return [f"{topic}: {exc}"]
    return []
