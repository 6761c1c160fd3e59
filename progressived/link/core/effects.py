"""The money effect of each table message on the linked meters (pure).

Each function works on a :class:`Work` copy of the book's maps and either records the
effect (balanced postings, claim and group changes) or raises :class:`Refusal`, in which
case the caller throws the copy away: a refused message changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from math import floor

from progressived.core.money import UNITS_PER_CENT, truncate_to_cent
from progressived.core.params import AboveLimit, Policy
from progressived.engine import accounts
from progressived.engine.events import Posting
from progressived.link.core import params as lp
from progressived.link.core.messages import (
    Claim,
    ClaimConfirm,
    ClaimReject,
    Contribution,
    Hit,
    Reversal,
)
from progressived.link.core.state import BookState, ClaimKey, ClaimState, Contributed, Group


class Refusal(Exception):
    """The message is well formed and in sequence, but the link cannot act on it."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass
class Work:
    """Mutable copies of the maps one message may change, plus its postings so far."""

    lseq: int
    at_ms: int
    balances: dict[str, int]
    claims: dict[ClaimKey, ClaimState]
    groups: dict[int, Group]
    contributions: dict[str, Mapping[str, Contributed]]
    epochs: dict[str, int]
    hits: dict[str, Hit]
    postings: list[Posting] = field(default_factory=list)
    touched: set[ClaimKey] = field(default_factory=set)  # claims whose award changed

    @classmethod
    def of(cls, state: BookState, lseq: int, at_ms: int) -> Work:
        return cls(
            lseq,
            at_ms,
            dict(state.balances),
            dict(state.claims),
            dict(state.groups),
            dict(state.contributions),
            dict(state.epochs),
            dict(state.hits),
        )

    def post(self, account: str, units: int) -> None:
        if units:
            self.postings.append(Posting(account, units))
            self.balances[account] = self.balances.get(account, 0) + units

    def get(self, account: str) -> int:
        return self.balances.get(account, 0)

    def new_epoch(self, meter_id: str) -> None:
        self.epochs[meter_id] = self.epochs.get(meter_id, 0) + 1


def contribute(link: lp.LinkParams, work: Work, msg: Contribution) -> None:
    """Post each meter's share, its reserve share and the house's rest, exactly."""
    if msg.id in work.contributions.get(msg.table, {}):
        raise Refusal("duplicate-id", f"message id {msg.id} was already used by {msg.table}")
    if not msg.wagers:
        raise Refusal("bad-wagers", "a contribution names at least one meter")
    seen: set[str] = set()
    for wagers in msg.wagers:
        spec = link.meter(wagers.meter)
        if spec is None:
            raise Refusal("unknown-meter", f"link {link.link_id} has no meter {wagers.meter}")
        if wagers.meter in seen:
            raise Refusal("bad-wagers", f"meter {wagers.meter} named twice")
        seen.add(wagers.meter)
        each, odd = divmod(wagers.units, wagers.count)
        if odd or each <= 0 or each % UNITS_PER_CENT:
            raise Refusal(
                "bad-wagers",
                f"{wagers.units} units is not {wagers.count} equal whole-cent wagers",
            )
        _post_share(spec, work, wagers.units)
    _keep(link, work, msg.table, msg.id, Contributed(msg.round, tuple(work.postings)))


# Contributions kept per table for a reversal. A table voids the round still open, whose
# contribution is its last (the next one needs the next LOCK); eight leave room to spare and
# keep the per-message copy of this map small.
REVERSIBLE = 8


def _keep(link: lp.LinkParams, work: Work, table: str, msg_id: str, done: Contributed) -> None:
    """Record a contribution (copying only this table's map), keeping the newest few."""
    mine = dict(work.contributions.get(table, {}))
    mine[msg_id] = done
    while len(mine) > REVERSIBLE:
        del mine[next(iter(mine))]  # the oldest: a void reverses a round still open
    work.contributions[table] = mine


def _post_share(spec: lp.MeterSpec, work: Work, units: int) -> None:
    to_meter = floor(units * spec.rate)
    to_reserve = floor(units * spec.reserve_rate)
    excess = 0
    if spec.limit is not None:
        excess = max(0, to_meter - max(0, spec.limit - work.get(accounts.meter(spec.id))))
    work.post(lp.linked_wagers(spec.id), -units)
    work.post(accounts.meter(spec.id), to_meter - excess)
    if spec.above_limit is AboveLimit.RESERVE:
        work.post(accounts.reserve(spec.id), to_reserve + excess)
    else:
        work.post(accounts.reserve(spec.id), to_reserve)
        work.post(accounts.overflow(spec.id), excess)
    work.post(lp.house_retained(spec.id), units - to_meter - to_reserve)


def reverse(link: lp.LinkParams, work: Work, msg: Reversal) -> None:
    """Take a voided round's contribution back, once.

    The meter's share stays on the meter (signs showed it, and a meter is only decreased by
    an award); the reserve and overflow give back what they still hold of it; the house
    bears the rest, so the wagers returned to players are balanced to the unit.
    """
    done = work.contributions.get(msg.table, {}).get(msg.of)
    if done is None:
        raise Refusal("unknown-contribution", f"{msg.table} has no contribution {msg.of}")
    if done.reversed:
        raise Refusal("already-reversed", f"contribution {msg.of} was already reversed")
    for posting in done.postings:
        account, units = posting.account, posting.units
        kind, _, meter_id = account.partition(":")
        if account.startswith("linked_wagers:"):
            work.post(account, -units)
            work.post(lp.house_retained(meter_id), units)
        elif kind in ("reserve", "overflow"):
            back = min(units, max(0, work.get(account)))
            work.post(account, -back)
            work.post(lp.house_retained(meter_id), back)
        elif kind == "meter":
            continue
    _keep(link, work, msg.table, msg.of, replace(done, reversed=True))


def claim(link: lp.LinkParams, work: Work, msg: Claim) -> None:
    """Price the claim at this place in the link's log (or join an open split group)."""
    spec = link.meter(msg.meter)
    if spec is None:
        raise Refusal("unknown-meter", f"link {link.link_id} has no meter {msg.meter}")
    percent = spec.hands.get(msg.hand)
    if percent is None:
        raise Refusal("unknown-hand", f"meter {msg.meter} does not pay {msg.hand}")
    key = (msg.table, msg.claim)
    if key in work.claims:
        raise Refusal("duplicate-claim", f"claim {msg.claim} of {msg.table} already exists")
    group = _open_group(link, work, msg)
    if group is not None:
        work.groups[group.id] = replace(group, members=(*group.members, key))
        work.claims[key] = _new_claim(msg, group.id, work.lseq)
        _reshare(work, work.groups[group.id])
        return
    meter_acc = accounts.meter(spec.id)
    total = truncate_to_cent(floor(max(0, work.get(meter_acc)) * percent))
    work.post(meter_acc, -total)
    work.post(accounts.pending(spec.id), total)
    reset_reserve = reset_seed = 0
    if percent == 1:
        reset_reserve = max(0, work.get(accounts.reserve(spec.id)))
        reset_seed = spec.seed
        work.post(accounts.reserve(spec.id), -reset_reserve)
        work.post(accounts.seed_funding(spec.id), -reset_seed)
        work.post(meter_acc, reset_reserve + reset_seed)
    work.new_epoch(spec.id)
    work.groups[work.lseq] = Group(
        work.lseq, spec.id, msg.hand, total, work.at_ms, (key,), reset_reserve, reset_seed
    )
    work.claims[key] = replace(_new_claim(msg, work.lseq, work.lseq), units=total)
    work.touched.add(key)
    work.hits[spec.id] = Hit(table=msg.table, seat=msg.seat, hand=msg.hand, units=total)


def _new_claim(msg: Claim, group: int, order: int) -> ClaimState:
    return ClaimState(
        msg.table, msg.claim, msg.meter, msg.hand, msg.seat, group, 0, order, "pending"
    )


def _open_group(link: lp.LinkParams, work: Work, msg: Claim) -> Group | None:
    """Split policy: the open group of this meter and hand inside the window, if any."""
    if link.policy is not Policy.SPLIT:
        return None
    for group in sorted(work.groups.values(), key=lambda g: -g.id):
        if group.meter != msg.meter or group.final:
            continue
        if work.at_ms - group.opened_ms > link.split_window_ms:
            return None  # newer groups come first: older ones are further out of the window
        if group.hand == msg.hand and _pending(work, group):
            return group
    return None


def _pending(work: Work, group: Group) -> list[ClaimKey]:
    return [k for k in group.members if work.claims[k].state == "pending"]


def _reshare(work: Work, group: Group) -> None:
    """Share the group's total among its pending members; the odd cents to the first."""
    members = _pending(work, group)
    share, odd = divmod(group.total // UNITS_PER_CENT, len(members))
    for index, key in enumerate(members):
        units = (share + (odd if index == 0 else 0)) * UNITS_PER_CENT
        if work.claims[key].units != units:
            work.touched.add(key)
        work.claims[key] = replace(work.claims[key], units=units)
    work.touched.update(members)


def _pending_claim(work: Work, table: str, claim_id: str) -> ClaimState:
    found = work.claims.get((table, claim_id))
    if found is None:
        raise Refusal("unknown-claim", f"{table} has no claim {claim_id} at this link")
    if found.state == "paid":
        raise Refusal("already-paid", f"claim {claim_id} was already paid")
    if found.state == "rejected":
        raise Refusal("already-rejected", f"claim {claim_id} was already rejected")
    return found


def confirm(link: lp.LinkParams, work: Work, msg: ClaimConfirm) -> None:
    """Post the claim's award as paid; its group's shares are final from now on."""
    found = _pending_claim(work, msg.table, msg.claim)
    work.post(accounts.pending(found.meter), -found.units)
    work.post(accounts.paid_attendant(found.meter), found.units)
    work.claims[(msg.table, msg.claim)] = replace(found, state="paid")
    work.groups[found.group] = replace(work.groups[found.group], final=True)
    work.touched.add((msg.table, msg.claim))


def reject(link: lp.LinkParams, work: Work, msg: ClaimReject) -> None:
    """Withdraw the claim; when no member of its group remains, restore the meter."""
    key = (msg.table, msg.claim)
    found = _pending_claim(work, msg.table, msg.claim)
    group = work.groups[found.group]
    work.claims[key] = replace(found, state="rejected", units=0)
    work.touched.add(key)
    meter_acc = accounts.meter(found.meter)
    if group.final:
        # Shares are fixed: the rejected share goes back to the meter.
        work.post(accounts.pending(found.meter), -found.units)
        work.post(meter_acc, found.units)
        work.groups[group.id] = replace(group, total=group.total - found.units)
        return
    if _pending(work, group):
        _reshare(work, group)
        return
    work.post(accounts.pending(found.meter), -group.total)
    work.post(meter_acc, group.total)
    hit = work.hits.get(found.meter)
    if hit is not None and any(
        (hit.table, hit.seat, hit.hand) == (c.table, c.seat, c.hand)
        for c in (work.claims[k] for k in group.members)
    ):
        del work.hits[found.meter]  # the award withdrawn: the signs name no winner for it
    reset = group.reset_reserve + group.reset_seed
    if reset and _latest_live(work, group) and work.get(meter_acc) >= reset:
        # Nothing priced on this meter since: the restore is exact (contributions stay).
        work.post(meter_acc, -reset)
        work.post(accounts.reserve(found.meter), group.reset_reserve)
        work.post(accounts.seed_funding(found.meter), group.reset_seed)
        work.new_epoch(found.meter)
    work.groups[group.id] = replace(group, total=0)


def _latest_live(work: Work, group: Group) -> bool:
    """No later group on this meter still holds a pending or paid claim."""
    return not any(
        g.id > group.id
        and g.meter == group.meter
        and any(work.claims[k].state != "rejected" for k in g.members)
        for g in work.groups.values()
    )
