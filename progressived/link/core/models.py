"""The link's messages as strict, frozen pydantic dataclasses: the one source of their rules.

Each field's type says everything the protocol requires of it -- an integer and its range, an
id's pattern, a text's length, a list's length, the values of an enum -- and both the decoder
(:mod:`progressived.link.core.messages`) and the JSON Schemas docs/link.md prints
(:mod:`progressived.link.core.schemas`) read it from here, so the two cannot disagree.

Strict: an integer is an ``int`` and never a ``bool``, a float or a numeric string; a string
is a ``str``; no key beyond the fields (``extra="forbid"``). Frozen: a message is a value
(hashable, equal by its fields), built with positional or keyword arguments as the plain
dataclasses it replaces were. A message built in the process is validated as one decoded
from outside is, so neither side ever sends what the other would refuse. Money (``units``) is an
integer in minor units, at most :data:`MAX_UNITS`. A message's ``type`` is a class constant,
not a field: the decoder picks the model by it before validating the rest.

The bounds on the bytes themselves (size, nesting depth, UTF-8, duplicate keys, ``NaN``, huge
integers) are checked before any model runs, by :mod:`progressived.core.wirejson`; a model
only ever sees a decoded JSON object. Nothing here does I/O.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, get_args

from pydantic import BeforeValidator, ConfigDict, Field, Strict
from pydantic.dataclasses import dataclass

MAX_SEQ = 2**53 - 1  # JSON-safe integers only
MAX_UNITS = 10**15  # one billion dollars in units: more is a bad payload, not a wager
MAX_COUNT = 1000  # wagers of one table on one meter in one LOCK
MAX_REASON = 500  # characters of a result's reason
MAX_ITEMS = 64  # entries of a list (wagers, awards)
MAX_SEAT = 12
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
HASH_PATTERN = r"^[0-9a-f]{64}$"

Id = Annotated[str, Strict(), Field(pattern=ID_PATTERN)]
Hash = Annotated[str, Strict(), Field(pattern=HASH_PATTERN)]
Position = Annotated[int, Strict(), Field(ge=0, le=MAX_SEQ)]  # sequences, rounds, log order
Ordinal = Annotated[int, Strict(), Field(ge=1, le=MAX_SEQ)]  # a table's messages count from 1
Units = Annotated[int, Strict(), Field(ge=0, le=MAX_UNITS)]
Seat = Annotated[int, Strict(), Field(ge=1, le=MAX_SEAT)]
Count = Annotated[int, Strict(), Field(ge=1, le=MAX_COUNT)]
ShareOf = Annotated[int, Strict(), Field(ge=1, le=MAX_ITEMS)]
Stamp = Annotated[str, Strict(), Field(max_length=40)]  # a time as the sender writes it
Code = Annotated[str, Strict(), Field(max_length=40)]
Reason = Annotated[str, Strict(), Field(max_length=MAX_REASON)]
Status = Literal["applied", "refused", "resend"]
AwardState = Literal["pending", "paid", "rejected"]
STATUSES: tuple[str, ...] = get_args(Status)
AWARD_STATES: tuple[str, ...] = get_args(AwardState)


# No key beyond the fields; a validation error's text never quotes the (outside) input.
CONFIG = ConfigDict(extra="forbid", hide_input_in_errors=True)


def _measured(value: object) -> object:
    """A list is measured before its entries are read: one of 1,000 entries is refused at
    once (``bad-field``, the protocol has always said so before looking inside)."""
    if isinstance(value, list | tuple) and len(value) > MAX_ITEMS:
        raise ValueError(f"expected a list of at most {MAX_ITEMS}")
    return value


@dataclass(frozen=True, slots=True, config=CONFIG)
class LedgerHead:
    """A ledger's head as a link message carries it: the last journal row's sequence number
    and its chain hash (a table's, which the link witnesses; or the link's own)."""

    seq: Position
    hash: Hash


@dataclass(frozen=True, slots=True, config=CONFIG)
class MeterWagers:
    """Wagers locked on one linked meter: how many, and their total in units."""

    meter: Id
    count: Count
    units: Units


# Lists: a tuple in the process, an array on the wire, measured first.
Wagers = Annotated[
    tuple[MeterWagers, ...], Field(max_length=MAX_ITEMS), BeforeValidator(_measured)
]


@dataclass(frozen=True, slots=True, kw_only=True, config=CONFIG)
class TableMessage:
    """Envelope of every table -> link message."""

    type: ClassVar[str] = ""
    table: Id
    seq: Ordinal
    id: Id
    head: LedgerHead
    at: Stamp


@dataclass(frozen=True, slots=True, kw_only=True, config=CONFIG)
class Contribution(TableMessage):
    """One LOCK's wagers on the linked meters (one entry per meter, each meter once)."""

    type: ClassVar[str] = "contribution"
    round: Position
    wagers: Wagers


@dataclass(frozen=True, slots=True, kw_only=True, config=CONFIG)
class Claim(TableMessage):
    """A meter hand keyed at the table: price it at its place in the link's log."""

    type: ClassVar[str] = "claim"
    claim: Id
    round: Position
    seat: Seat
    hand: Id
    meter: Id


@dataclass(frozen=True, slots=True, kw_only=True, config=CONFIG)
class ClaimConfirm(TableMessage):
    """The supervisor confirmed the claim: the link posts it as paid."""

    type: ClassVar[str] = "claim_confirm"
    claim: Id
    by: Id


@dataclass(frozen=True, slots=True, kw_only=True, config=CONFIG)
class ClaimReject(TableMessage):
    """The supervisor rejected the claim: the link restores the meter."""

    type: ClassVar[str] = "claim_reject"
    claim: Id
    by: Id


@dataclass(frozen=True, slots=True, kw_only=True, config=CONFIG)
class Reversal(TableMessage):
    """The round of an earlier contribution was voided; ``of`` is that message's ``id``."""

    type: ClassVar[str] = "reversal"
    of: Id
    round: Position


@dataclass(frozen=True, slots=True, kw_only=True, config=CONFIG)
class Award:
    """A claim's standing at the link: its units, place in the log, and split share."""

    claim: Id
    meter: Id
    hand: Id
    units: Units
    order: Position  # the link log position that priced it (orders claims across tables)
    share_of: ShareOf  # claims sharing one award (split policy); 1 when alone
    state: AwardState


Awards = Annotated[tuple[Award, ...], Field(max_length=MAX_ITEMS), BeforeValidator(_measured)]


@dataclass(frozen=True, slots=True, kw_only=True, config=CONFIG)
class Result:
    """The link's answer to one table message (stored; a repeat gets the same one)."""

    type: ClassVar[str] = "result"
    link: Id
    table: Id
    seq: Position  # the table message answered (0: a payload that named none)
    id: Id
    status: Status
    code: Code  # "ok" or a refusal tag
    reason: Reason
    resend_from: Position  # with status "resend": the next sequence the link expects; else 0
    lseq: Position  # link log position of the effect (0 when nothing was applied)
    head: LedgerHead
    awards: Awards = ()


@dataclass(frozen=True, slots=True, kw_only=True, config=CONFIG)
class AwardUpdate:
    """Unsolicited: a claim's award changed (a split group gained or lost a member)."""

    type: ClassVar[str] = "award"
    link: Id
    table: Id
    lseq: Position
    head: LedgerHead
    award: Award


@dataclass(frozen=True, slots=True, kw_only=True, config=CONFIG)
class Heartbeat:
    """The link is alive; ``expect`` is the next sequence it wants from this table."""

    type: ClassVar[str] = "heartbeat"
    link: Id
    table: Id
    expect: Ordinal
    lseq: Position
    head: LedgerHead
    at: Stamp


@dataclass(frozen=True, slots=True, kw_only=True, config=CONFIG)
class Hit:
    """The last hit on a linked meter, for the common sign (asset id, seat, hand, amount)."""

    table: Id
    seat: Seat
    hand: Id
    units: Units


@dataclass(frozen=True, slots=True, kw_only=True, config=CONFIG)
class LinkedMeter:
    """The linked meter as every sign shows it (retained; only the link publishes it)."""

    type: ClassVar[str] = "meter"
    link: Id
    meter: Id
    units: Units
    epoch: Position  # rises at every claim and restore; a sign never shows an older (epoch, lseq)
    lseq: Position
    head: LedgerHead
    hit: Hit | None = None


LinkMessage = Result | AwardUpdate | Heartbeat | LinkedMeter
TABLE_TYPES: dict[str, type[TableMessage]] = {
    cls.type: cls for cls in (Contribution, Claim, ClaimConfirm, ClaimReject, Reversal)
}
LINK_TYPES: dict[str, type[Result | AwardUpdate | Heartbeat | LinkedMeter]] = {
    cls.type: cls for cls in (Result, AwardUpdate, Heartbeat, LinkedMeter)
}
