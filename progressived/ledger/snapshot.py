"""TableState to JSON and back, for recovery snapshots.

A snapshot is the engine state after a given journal row; recovery loads the latest one
and replays only later rows, so start-up time does not grow with the ledger. The format
is plain JSON so an auditor can read it, and it must round-trip exactly
(``load(dump(state)) == state``), including zero balances and the order of tuples.

Written and read through the one strict snapshot codec
(:mod:`progressived.core.snapshot_codec`), as the link's snapshots are: every value must
have its field's JSON type (``"confirmed": "false"`` is refused, never read as true) and an
object with a key this code does not know is refused (:class:`SnapshotError`, naming the
field).
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import Any, TypeVar

from progressived.core.snapshot_codec import (
    SnapshotError,
    array,
    boolean,
    canonical,
    fields,
    integer,
    mapping,
    parse,
    string,
    tuple_of,
)
from progressived.engine.events import Posting, Postings
from progressived.engine.meter_requests import (
    Claim,
    Contribute,
    MeterAward,
    MeterRequest,
    PostAward,
    RefundContribution,
    ReserveAwards,
    VoidAward,
    request_to_dict,
)
from progressived.engine.state import KeyedHand, Phase, TableState

__all__ = [
    "FORMAT",
    "KEYS",
    "OPTIONAL_KEYS",
    "SnapshotError",
    "dumps",
    "loads",
    "state_from_dict",
    "state_to_dict",
]

FORMAT = 1
T = TypeVar("T")

KEYS = (
    "format", "round", "phase", "sensed", "locked", "wager_postings", "keyed", "awards",
    "same_player", "closed", "balances", "opened",
)  # fmt: skip
# Keys a snapshot may lack: ``approved`` (ledgers from before split awards), ``awaiting``
# and ``linked_off`` (written only when set, on a linked table).
OPTIONAL_KEYS = ("approved", "awaiting", "linked_off")
_AWARD = ("seat", "hand", "meter", "units", "meter_before", "postings", "confirmed", "share_of")
_REQUEST = {
    "contribute": ("type", "round", "seat", "units", "count"),
    "reserve": ("type", "round", "first_order", "claims"),
    "post": ("type", "round", "by", "award"),
    "void": ("type", "round", "reason", "award"),
    "refund": ("type", "round", "seat", "units", "receipt"),
}
_ANY_REQUEST_KEY = frozenset(key for keys in _REQUEST.values() for key in keys)


def _postings(postings: Postings) -> list[list[Any]]:
    return [[p.account, p.units] for p in postings]


def state_to_dict(state: TableState) -> dict[str, Any]:
    """A JSON-ready dict of every field of ``state``."""
    out = {
        "format": FORMAT,
        "round": state.round,
        "phase": state.phase.value,
        "sensed": sorted(state.sensed),
        "locked": sorted(state.locked),
        "wager_postings": [[seat, _postings(p)] for seat, p in state.wager_postings],
        "keyed": [[k.seat, k.hand, k.source, k.units] for k in state.keyed],
        "awards": [
            {
                "seat": a.seat,
                "hand": a.hand,
                "meter": a.meter,
                "units": a.units,
                "meter_before": a.meter_before,
                "postings": _postings(a.postings),
                "confirmed": a.confirmed,
                "share_of": a.share_of,
            }
            for a in state.awards
        ],
        "same_player": [sorted(group) for group in state.same_player],
        "closed": sorted(state.closed),
        "balances": {account: state.balances[account] for account in sorted(state.balances)},
        "opened": sorted(state.opened),
        "approved": [list(a) for a in state.approved],
    }
    # Requests a deferred (linked) meter has not answered yet, and a round locked while the
    # link was down: written only when set, so a single table's snapshots are as before.
    if state.awaiting:
        out["awaiting"] = [request_to_dict(r) for r in state.awaiting]
    if state.linked_off:
        out["linked_off"] = True
    return out


# -- reading: every value checked for its type ---------------------------------------------


def _each(value: object, where: str, read: Callable[[Any, str], T]) -> tuple[T, ...]:
    return tuple(read(item, where) for item in array(value, where))


def _from_postings(value: object, where: str) -> Postings:
    def posting(item: object, at: str) -> Posting:
        account, units = tuple_of(item, at, 2)
        return Posting(string(account, f"{at}.account"), integer(units, f"{at}.units"))

    return _each(value, f"{where}[]", posting)


def _seats(value: object, where: str) -> frozenset[int]:
    return frozenset(_each(value, f"{where}[]", integer))


def _names(value: object, where: str) -> frozenset[str]:
    return frozenset(_each(value, f"{where}[]", string))


def _wager(item: object, where: str) -> tuple[int, Postings]:
    seat, postings = tuple_of(item, where, 2)
    return integer(seat, f"{where}.seat"), _from_postings(postings, f"{where}.postings")


def _keyed(item: object, where: str) -> KeyedHand:
    seat, hand, source, units = tuple_of(item, where, 4)
    return KeyedHand(
        integer(seat, f"{where}.seat"),
        string(hand, f"{where}.hand"),
        string(source, f"{where}.source"),
        integer(units, f"{where}.units"),
    )


def _award(item: object, where: str) -> MeterAward:
    a = fields(item, where, _AWARD)
    return MeterAward(
        seat=integer(a["seat"], f"{where}.seat"),
        hand=string(a["hand"], f"{where}.hand"),
        meter=string(a["meter"], f"{where}.meter"),
        units=integer(a["units"], f"{where}.units"),
        meter_before=integer(a["meter_before"], f"{where}.meter_before"),
        postings=_from_postings(a["postings"], f"{where}.postings"),
        confirmed=boolean(a["confirmed"], f"{where}.confirmed"),
        share_of=integer(a["share_of"], f"{where}.share_of"),
    )


def _approved(item: object, where: str) -> tuple[int, str, str]:
    seat, hand, by = tuple_of(item, where, 3)
    return integer(seat, f"{where}.seat"), string(hand, f"{where}.hand"), string(by, f"{where}.by")


def _claim(item: object, where: str) -> Claim:
    seat, hand, meter = tuple_of(item, where, 3)
    return Claim(
        integer(seat, f"{where}.seat"),
        string(hand, f"{where}.hand"),
        string(meter, f"{where}.meter"),
    )


def _request(item: object, where: str) -> MeterRequest:
    """A request a deferred meter has not answered (:func:`request_to_dict`'s form)."""
    kind = fields(item, where, ("type",), _ANY_REQUEST_KEY)["type"]
    keys = _REQUEST.get(kind) if isinstance(kind, str) else None
    if keys is None:
        raise SnapshotError(f"{where}.type: not a meter request type: {kind!r}")
    r = fields(item, where, keys)
    at = f"{where}({kind})"
    round_no = integer(r["round"], f"{at}.round")
    match kind:
        case "contribute":
            return Contribute(
                round=round_no,
                seat=integer(r["seat"], f"{at}.seat"),
                units=integer(r["units"], f"{at}.units"),
                count=integer(r["count"], f"{at}.count"),
            )
        case "reserve":
            return ReserveAwards(
                round=round_no,
                claims=_each(r["claims"], f"{at}.claims[]", _claim),
                first_order=integer(r["first_order"], f"{at}.first_order"),
            )
        case "post":
            award = _award(r["award"], f"{at}.award")
            return PostAward(round=round_no, award=award, by=string(r["by"], f"{at}.by"))
        case "void":
            award = _award(r["award"], f"{at}.award")
            return VoidAward(
                round=round_no, award=award, reason=string(r["reason"], f"{at}.reason")
            )
        case _:  # "refund": the last of _REQUEST's keys
            return RefundContribution(
                round=round_no,
                seat=integer(r["seat"], f"{at}.seat"),
                units=integer(r["units"], f"{at}.units"),
                receipt=_from_postings(r["receipt"], f"{at}.receipt"),
            )


def _phase(value: object) -> Phase:
    try:
        return Phase(string(value, "phase"))
    except ValueError:
        raise SnapshotError(f"phase: not a phase: {value!r}") from None


def _balances(value: object) -> MappingProxyType[str, int]:
    raw = mapping(value, "balances")
    return MappingProxyType({k: integer(v, f"balances[{k!r}]") for k, v in raw.items()})


def _linked_off(data: dict[str, Any]) -> bool:
    return boolean(data["linked_off"], "linked_off") if "linked_off" in data else False


def state_from_dict(data: Any) -> TableState:
    """Rebuild the state written by :func:`state_to_dict` (:class:`SnapshotError`, naming
    the field, if any value is not of its field's type or a key is unknown)."""
    d = fields(data, "snapshot", KEYS, OPTIONAL_KEYS)
    if d["format"] != FORMAT:
        raise SnapshotError(f"unknown snapshot format {d['format']!r}")
    return TableState(
        round=integer(d["round"], "round"),
        phase=_phase(d["phase"]),
        sensed=_seats(d["sensed"], "sensed"),
        locked=_seats(d["locked"], "locked"),
        wager_postings=_each(d["wager_postings"], "wager_postings[]", _wager),
        keyed=_each(d["keyed"], "keyed[]", _keyed),
        awards=_each(d["awards"], "awards[]", _award),
        same_player=_each(d["same_player"], "same_player[]", _seats),
        closed=_names(d["closed"], "closed"),
        balances=_balances(d["balances"]),
        opened=_names(d["opened"], "opened"),
        approved=_each(d.get("approved", []), "approved[]", _approved),
        awaiting=_each(d.get("awaiting", []), "awaiting[]", _request),
        linked_off=_linked_off(dict(d)),
    )


def dumps(state: TableState) -> str:
    """Canonical JSON text of a state (sorted keys, no spaces, ASCII)."""
    return canonical(state_to_dict(state))


def loads(text: str) -> TableState:
    """The state of a snapshot's text (:class:`SnapshotError` if it cannot be read)."""
    return state_from_dict(parse(text, format=FORMAT))
