"""Events the engine emits: what happened, with the money postings it caused.

Every money event carries balanced double-entry postings (they sum to zero) over named
accounts (see :mod:`progressived.engine.accounts`). The ledger stores the events and their
postings; the engine's own balances are the same postings folded, so both always agree.
Field names are a contract with the ledger, the MQTT events and export formats.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from progressived.engine.meter_requests import MeterRequest, request_from_dict, request_to_dict
from progressived.engine.postings import Posting as Posting  # noqa: PLC0414 (re-exported:
from progressived.engine.postings import Postings as Postings  # noqa: PLC0414 its old home)


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of all events. ``round`` is the table's round number, ``seat`` 0 when none."""

    kind: ClassVar[str] = "event"
    money: ClassVar[bool] = False

    at: str
    round: int
    seat: int = 0
    postings: Postings = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MeterOpened(Event):
    """A meter is funded for the first time with its starting amount (seed funding)."""

    kind: ClassVar[str] = "meter_opened"
    money: ClassVar[bool] = True
    meter: str
    units: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SensorsChanged(Event):
    """The seats whose sensors now hold a wager (the board reports the full state)."""

    kind: ClassVar[str] = "sensors_changed"
    present: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LateBet(Event):
    """After LOCK a bet was placed, or a late bet removed: reported to the dealer, changes nothing.

    The sensor state itself follows in a :class:`SensorsChanged`.
    """

    kind: ClassVar[str] = "late_bet"
    present: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundLocked(Event):
    """LOCK: these seats' wagers are locked in for the round."""

    kind: ClassVar[str] = "round_locked"
    seats: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WagerLocked(Event):
    """One seat's wager collected and its contributions posted to meters and reserves."""

    kind: ClassVar[str] = "wager_locked"
    money: ClassVar[bool] = True
    units: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkedContribution(Event):
    """Wagers locked at a linked table, contributing to this table's meters."""

    kind: ClassVar[str] = "linked_contribution"
    money: ClassVar[bool] = True
    source_table: str
    count: int
    units: int
    contribution_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WagerRefunded(Event):
    """VOID: the exact reverse of one seat's :class:`WagerLocked`."""

    kind: ClassVar[str] = "wager_refunded"
    money: ClassVar[bool] = True
    units: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HandKeyed(Event):
    """A winning hand keyed at a seat that is paid from the tray, or only triggers envy.

    ``source`` is ``tray`` (``units`` owed from the tray at RECONCILE) or ``none``
    (the seat holds no wager: it pays that seat nothing, it may trigger envy).
    """

    kind: ClassVar[str] = "hand_keyed"
    hand: str
    source: str
    units: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HandUnkeyed(Event):
    """A second press turned a tray or envy-only hand off.

    ``source`` and ``units`` are those of the :class:`HandKeyed` it turns off (the defaults
    read rows journaled before they were recorded).
    """

    kind: ClassVar[str] = "hand_unkeyed"
    hand: str
    source: str = "none"
    units: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AwardKeyed(Event):
    """A meter-percentage award is locked and awaits the supervisor.

    ``units`` (whole cents) leaves the meter for the pending account; a 100% award then
    resets the meter to seed plus reserve at once (``reset_reserve``, ``reset_seed``).
    ``order`` is the award's place in the round's recorded order (0 first).
    """

    kind: ClassVar[str] = "award_keyed"
    money: ClassVar[bool] = True
    hand: str
    meter: str
    units: int
    meter_before: int
    meter_after: int
    reset_reserve: int
    reset_seed: int
    order: int
    share_of: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class AwardReversed(Event):
    """The exact reverse of an :class:`AwardKeyed`.

    ``reason``: ``unkeyed`` (second press), ``rejected`` (supervisor), ``repriced`` (an
    award ahead of it in the order changed, so it is keyed again at its new amount) or
    ``voided`` (misdeal).
    """

    kind: ClassVar[str] = "award_reversed"
    money: ClassVar[bool] = True
    hand: str
    meter: str
    units: int
    meter_before: int
    meter_after: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AwardConfirmed(Event):
    """The supervisor confirmed a meter award: it is paid by an attendant from the meter."""

    kind: ClassVar[str] = "award_confirmed"
    money: ClassVar[bool] = True
    hand: str
    meter: str
    units: int
    by: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AwardApproved(Event):
    """Under the ``split`` policy the supervisor approved a meter award; nothing is paid yet.

    A split share depends on every hand of the group, so it is paid (an
    :class:`AwardConfirmed`, at RECONCILE) only once the round's keyed set is final: that
    way the supervisor's timing never changes how a group shares. ``units`` is the amount
    as keyed when approved; a later change to the group reprices it.
    """

    kind: ClassVar[str] = "award_approved"
    hand: str
    meter: str
    units: int
    by: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotsJoined(Event):
    """The dealer marked these spots as one player for the round."""

    kind: ClassVar[str] = "spots_joined"
    seats: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TrayPaid(Event):
    """RECONCILE: a fixed pay from the tray."""

    kind: ClassVar[str] = "tray_paid"
    money: ClassVar[bool] = True
    hand: str
    units: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvyPaid(Event):
    """RECONCILE: an envy bonus to ``seat`` for the hand at ``from_seat`` (from the tray)."""

    kind: ClassVar[str] = "envy_paid"
    money: ClassVar[bool] = True
    hand: str
    from_seat: int
    units: int


@dataclass(frozen=True, slots=True)
class Payment:
    """One line of a round's settlement."""

    seat: int
    hand: str
    source: str  # meter | tray | envy
    units: int
    from_seat: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundReconciled(Event):
    """RECONCILE: the round is settled; ``settlement`` is itemised in the rule's order."""

    kind: ClassVar[str] = "round_reconciled"
    settlement: tuple[Payment, ...]
    seats: tuple[int, ...] = field(default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundVoided(Event):
    """VOID: the round was cancelled and its contributions reversed."""

    kind: ClassVar[str] = "round_voided"
    by: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TableClosed(Event):
    """The progressive is closed for ``reason`` (LOCK refused while any reason holds)."""

    kind: ClassVar[str] = "table_closed"
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TableOpened(Event):
    """A reason to keep the progressive closed has cleared."""

    kind: ClassVar[str] = "table_opened"
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MeterAdjusted(Event):
    """A documented meter correction: ``units`` (signed) against the adjustments account."""

    kind: ClassVar[str] = "meter_adjusted"
    money: ClassVar[bool] = True
    meter: str
    units: int
    meter_before: int
    reason: str
    operator: str
    approved_by: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MeterTransferred(Event):
    """A documented transfer of ``units`` from one meter to another."""

    kind: ClassVar[str] = "meter_transferred"
    money: ClassVar[bool] = True
    from_meter: str
    to_meter: str
    units: int
    reason: str
    operator: str
    approved_by: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MeterRequested(Event):
    """The round asked the meter book and is waiting for its answer (deferred adapters only;
    :mod:`progressived.engine.meter_port`)."""

    kind: ClassVar[str] = "meter_requested"
    request: MeterRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimRefused(Event):
    """A deferred meter refused a claim (``ReserveAwards``) or its confirmation
    (``PostAward``): the request is answered, the claim leaves the round, nothing is paid."""

    kind: ClassVar[str] = "claim_refused"
    hand: str
    meter: str
    code: str
    reason: str


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        MeterOpened,
        SensorsChanged,
        LateBet,
        RoundLocked,
        WagerLocked,
        LinkedContribution,
        WagerRefunded,
        HandKeyed,
        HandUnkeyed,
        AwardKeyed,
        AwardReversed,
        AwardConfirmed,
        AwardApproved,
        SpotsJoined,
        TrayPaid,
        EnvyPaid,
        RoundReconciled,
        RoundVoided,
        TableClosed,
        TableOpened,
        MeterAdjusted,
        MeterTransferred,
        MeterRequested,
        ClaimRefused,
    )
}


def event_to_dict(event: Event) -> dict[str, Any]:
    """A JSON-ready dict: ``kind`` plus every field; postings as ``[account, units]`` pairs."""
    out: dict[str, Any] = {"kind": event.kind}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if f.name == "postings":
            out["postings"] = [[p.account, p.units] for p in value]
        elif f.name == "settlement":
            out["settlement"] = [dataclasses.asdict(p) for p in value]
        elif f.name == "request":  # a deferred meter request (meter_requested)
            out["request"] = request_to_dict(value)
        elif isinstance(value, tuple):
            out[f.name] = list(value)
        else:
            out[f.name] = value
    return out


def event_from_dict(data: Mapping[str, Any]) -> Event:
    """Rebuild an event from :func:`event_to_dict` output."""
    cls = EVENT_TYPES[data["kind"]]
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.name == "postings":
            value = tuple(Posting(str(a), int(u)) for a, u in value)
        elif f.name == "settlement":
            value = tuple(Payment(**p) for p in value)
        elif f.name == "request":
            value = request_from_dict(value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)
