"""An engine event's stored JSON text, written out field by field: the ledger's hot path.

The stored text of an engine row is ``dumps(event_to_dict(event))`` (sorted keys, no
spaces, ASCII only: :func:`progressived.ledger.rows.dumps`), and the hash chain covers it,
so it must not change by a byte. Building the dict and handing it to the JSON encoder was
about a third of a linked contribution's plan; :func:`event_text` writes the same text with
one generated function per event type (one f-string, the keys in the order ``sort_keys``
puts them) for the values whose JSON is plain (``str`` and ``int`` and their subclasses
written as the encoder writes them, ``bool``, ``None``, exact tuples of those, postings),
and answers ``None`` for anything else (floats, lists, a meter request, a settlement),
whose text the caller then takes from the encoder as before.
tests/test_ledger_event_text.py checks the text equal to the encoder's for every event
kind the engine emits and for drawn values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import Final, cast

from progressived.engine.events import Event, Posting

# Fields whose JSON is not a plain value (event_to_dict converts them): their types always
# take the encoder's path.
_CONVERTED: Final = frozenset({"settlement", "request"})


def _int(value: object) -> str:
    if type(value) is int:
        return int.__repr__(value)
    return _scalar(value)


def _scalar(value: object) -> str:
    """What the encoder writes for a plain value (its own checks, in its order); TypeError
    for anything else."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if type(value) is tuple:
        return "[" + ",".join([_scalar(item) for item in value]) + "]"
    raise TypeError("not a plain value: the encoder's path")


def _postings(value: object) -> str:
    cached = _POSTINGS.get(id(value))
    if cached is not None and cached[0] is value:
        return cached[1]
    text = _postings_text(value)
    if len(_POSTINGS) >= _POSTINGS_SIZE:
        _POSTINGS.clear()
    _POSTINGS[id(value)] = (value, text)  # holds ``value``: its id is not reused meanwhile
    return text


# The engine hands the same postings tuple to every contribution of one count (its
# contributions are cached by parameters and count): its text, by the tuple's identity.
# Postings are immutable (a tuple of frozen Posting of str and int), so the text stays true.
_POSTINGS: dict[int, tuple[object, str]] = {}
_POSTINGS_SIZE = 256


def _postings_text(value: object) -> str:
    if type(value) is not tuple:
        raise TypeError("postings not a tuple: the encoder's path")
    legs = []
    for posting in value:
        if type(posting) is not Posting:
            raise TypeError("not a Posting: the encoder's path")
        legs.append(f"[{encode_basestring_ascii(posting.account)},{_int(posting.units)}]")
    return "[" + ",".join(legs) + "]"


# By the field's declared type (annotations are text here); a value of another type still
# gets the encoder's text or a TypeError, never a wrong text.
_BY_TYPE: Final[dict[str, Callable[[object], str]]] = {
    "str": cast("Callable[[object], str]", encode_basestring_ascii),  # TypeError if not a str
    "int": _int,
    "Postings": _postings,
}
_Writer = Callable[[Event], str]  # an event type's text writer; TypeError: the encoder's path
_WRITERS: dict[type[Event], _Writer | None] = {}


def _writer(cls: type[Event]) -> _Writer | None:
    """One function per event type that returns its whole text in one f-string: the keys
    in ``sort_keys`` order (code points), each value through its type's writer. Generated
    once per type (as ``dataclasses`` generates ``__init__``): field names are identifiers,
    and the keys' text and the writers are passed in, never spliced into the source."""
    fields = {f.name: f.type for f in dataclasses.fields(cls)}
    if _CONVERTED.intersection(fields):
        return None
    fields["kind"] = "str"
    env: dict[str, object] = {}
    parts = []
    for i, name in enumerate(sorted(fields)):
        if not name.isidentifier():
            return None
        env[f"_k{i}"] = encode_basestring_ascii(name) + ":"
        env[f"_w{i}"] = _BY_TYPE.get(str(fields[name]), _scalar)
        parts.append(f"{{_k{i}}}{{_w{i}(event.{name})}}")
    source = f"def text(event):\n    return '{{' + f\"{','.join(parts)}\" + '}}'\n"
    exec(source, env)  # generated from identifiers only, as above
    return cast("_Writer", env["text"])


def event_text(event: Event) -> str | None:
    """``dumps(event_to_dict(event))`` exactly, or ``None`` when the event holds a value
    this writer leaves to the encoder."""
    cls = type(event)
    try:
        write = _WRITERS[cls]
    except KeyError:
        write = _WRITERS[cls] = _writer(cls)
    if write is None:
        return None
    try:
        return write(event)
    except TypeError:
        return None
