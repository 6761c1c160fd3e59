"""decide / evolve: the round engine's rules.

``decide`` validates a command against the state and the parameters and returns the
events it causes (``Accepted``) or a reason (``Rejected``, state unchanged). ``evolve``
folds one event into the state; ``decide`` builds its resulting state with ``evolve`` too,
so a state is exactly the replay of its events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from math import floor
from types import MappingProxyType
from typing import Literal

from progressived.engine import accounts, deck
from progressived.engine.commands import (
    AdjustMeter,
    Command,
    Confirm,
    KeyHand,
    LinkedWagers,
    Lock,
    Reconcile,
    Reject,
    SamePlayer,
    Sensors,
    SetClosed,
    TransferMeter,
    Void,
)
from progressived.engine.events import (
    AwardApproved,
    AwardConfirmed,
    AwardKeyed,
    AwardReversed,
    EnvyPaid,
    Event,
    HandKeyed,
    HandUnkeyed,
    LateBet,
    LinkedContribution,
    MeterAdjusted,
    MeterOpened,
    MeterTransferred,
    Payment,
    Posting,
    Postings,
    RoundLocked,
    RoundReconciled,
    RoundVoided,
    SensorsChanged,
    SpotsJoined,
    TableClosed,
    TableOpened,
    TrayPaid,
    WagerLocked,
    WagerRefunded,
)
from progressived.engine.state import KeyedHand, MeterAward, Phase, TableState
from progressived.money import UNITS_PER_CENT, truncate_to_cent
from progressived.params import AboveLimit, Policy, TableParams
from progressived.paytable import HandRule, scale_amount


@dataclass(frozen=True, slots=True)
class Accepted:
    """The command was applied: ``events`` happened and ``state`` is the result."""

    events: tuple[Event, ...]
    state: TableState
    accepted: Literal[True] = True


@dataclass(frozen=True, slots=True)
class Rejected:
    """The command does not fit: ``reason`` says why (for the dealer); nothing changed."""

    reason: str
    code: str
    state: TableState
    accepted: Literal[False] = False


Decision = Accepted | Rejected


# --------------------------------------------------------------------------- evolve


def _post(balances: Mapping[str, int], postings: Postings) -> Mapping[str, int]:
    if not postings:
        return balances
    out = dict(balances)
    for posting in postings:
        out[posting.account] = out.get(posting.account, 0) + posting.units
    return MappingProxyType(out)


def _new_round(state: TableState) -> TableState:
    return replace(
        state,
        round=state.round + 1,
        phase=Phase.OPEN,
        locked=frozenset(),
        wager_postings=(),
        keyed=(),
        awards=(),
        same_player=(),
        approved=(),
    )


def evolve(state: TableState, event: Event) -> TableState:
    """Fold one event into the state (pure; used for replay and by ``decide``)."""
    state = replace(state, balances=_post(state.balances, event.postings))
    match event:
        case MeterOpened(meter=meter_id):
            return replace(state, opened=state.opened | {meter_id})
        case SensorsChanged(present=present):
            return replace(state, sensed=frozenset(present))
        case RoundLocked(seats=seats):
            return replace(state, phase=Phase.LOCKED, locked=frozenset(seats))
        case WagerLocked(seat=seat, postings=postings):
            return replace(state, wager_postings=(*state.wager_postings, (seat, postings)))
        case WagerRefunded(seat=seat):
            kept = tuple(w for w in state.wager_postings if w[0] != seat)
            return replace(state, wager_postings=kept, locked=state.locked - {seat})
        case HandKeyed(seat=seat, hand=hand, source=source, units=units):
            return replace(state, keyed=(*state.keyed, KeyedHand(seat, hand, source, units)))
        case HandUnkeyed(seat=seat, hand=hand):
            keyed = tuple(k for k in state.keyed if (k.seat, k.hand) != (seat, hand))
            return replace(state, keyed=keyed)
        case AwardKeyed():
            award = MeterAward(
                seat=event.seat,
                hand=event.hand,
                meter=event.meter,
                units=event.units,
                meter_before=event.meter_before,
                postings=event.postings,
                share_of=event.share_of,
                # A split award approved by the supervisor stays approved when repriced.
                confirmed=state.is_approved(event.seat, event.hand),
            )
            return replace(state, awards=(*state.awards, award))
        case AwardReversed(seat=seat, hand=hand):
            remaining = list(state.awards)
            for index in range(len(remaining) - 1, -1, -1):
                if (remaining[index].seat, remaining[index].hand) == (seat, hand):
                    del remaining[index]
                    break
            return replace(state, awards=tuple(remaining))
        case AwardConfirmed(seat=seat, hand=hand) | AwardApproved(seat=seat, hand=hand):
            awards = tuple(
                replace(a, confirmed=True) if (a.seat, a.hand) == (seat, hand) else a
                for a in state.awards
            )
            approved = tuple(a for a in state.approved if (a[0], a[1]) != (seat, hand))
            if isinstance(event, AwardApproved):
                approved = (*approved, (seat, hand, event.by))
            return replace(state, awards=awards, approved=approved)
        case SpotsJoined(seats=seats):
            group = frozenset(seats)
            others = tuple(g for g in state.same_player if not g & group)
            return replace(state, same_player=(*others, group))
        case RoundReconciled() | RoundVoided():
            return _new_round(state)
        case TableClosed(reason=reason):
            return replace(state, closed=state.closed | {reason})
        case TableOpened(reason=reason):
            return replace(state, closed=state.closed - {reason})
    return state


def _accept(state: TableState, events: Sequence[Event]) -> Accepted:
    for event in events:
        state = evolve(state, event)
    return Accepted(tuple(events), state)


def open_meters(params: TableParams, state: TableState, at: str = "") -> Accepted:
    """Fund every configured meter not funded yet with its starting amount (seed funding).

    A new table opens all its meters; a ledger whose configuration gained a meter opens
    just that one.
    """
    events: list[Event] = []
    for meter in params.meters:
        if meter.id in state.opened:
            continue
        units = params.start_units(meter)
        events.append(
            MeterOpened(
                at=at,
                round=state.round,
                meter=meter.id,
                units=units,
                postings=(
                    Posting(accounts.seed_funding(meter.id), -units),
                    Posting(accounts.meter(meter.id), units),
                ),
            )
        )
    return _accept(state, events)


def initial_state(params: TableParams, at: str = "") -> Accepted:
    """A brand-new table: each meter funded with its starting amount (seed funding)."""
    return open_meters(params, TableState(), at)


# --------------------------------------------------------------------------- decide


def decide(params: TableParams, state: TableState, command: Command) -> Decision:
    """Apply ``command`` to ``state`` under ``params``; never raises for a bad command."""
    match command:
        case Sensors():
            return _sensors(params, state, command)
        case Lock():
            return _lock(params, state, command)
        case KeyHand():
            return _key(params, state, command)
        case Confirm():
            return _confirm(params, state, command)
        case Reject():
            return _reject(params, state, command)
        case SamePlayer():
            return _same_player(params, state, command)
        case Reconcile():
            return _reconcile(params, state, command)
        case Void():
            return _void(params, state, command)
        case SetClosed():
            return _set_closed(state, command)
        case LinkedWagers():
            return _linked(params, state, command)
        case AdjustMeter():
            return _adjust(params, state, command)
        case TransferMeter():
            return _transfer(params, state, command)
    return Rejected(f"unknown command {command!r}", "unknown-command", state)


def seat_problem(params: TableParams, seat: object) -> str | None:
    """Why ``seat`` is not a seat of this table, or ``None`` (one wording for every input)."""
    if isinstance(seat, bool) or not isinstance(seat, int) or not 1 <= seat <= params.seats:
        return f"seat {seat} is not on this table (seats 1-{params.seats})"
    return None


def _seat_error(params: TableParams, seat: int, state: TableState) -> Rejected | None:
    if problem := seat_problem(params, seat):
        return Rejected(problem, "bad-seat", state)
    return None


def _sensors(params: TableParams, state: TableState, cmd: Sensors) -> Decision:
    for seat in sorted(cmd.present, key=str):
        if error := _seat_error(params, seat, state):
            return error
    present = frozenset(cmd.present)
    if present == state.sensed:
        return Accepted((), state)
    if state.phase is Phase.OPEN:
        return _accept(
            state, [SensorsChanged(at=cmd.at, round=state.round, present=tuple(sorted(present)))]
        )
    # After LOCK the dealer takes the locked wagers off the sensors: expected. Anything
    # else (a bet placed late, a late bet withdrawn) is reported and changes nothing.
    events: list[Event] = [
        LateBet(at=cmd.at, round=state.round, seat=s, present=s in present)
        for s in sorted(present ^ state.sensed)
        if s in present or s not in state.locked
    ]
    events.append(SensorsChanged(at=cmd.at, round=state.round, present=tuple(sorted(present))))
    return _accept(state, events)


def _contribution(
    params: TableParams, balances: Mapping[str, int], count: int = 1, source: str = accounts.WAGERS
) -> Postings:
    """The postings for ``count`` wagers: each meter's and reserve's share, the rest retained.

    Above a meter's limit the meter's share goes to the reserve or the overflow account.
    Shares are floored to the unit; what flooring leaves is retained by the house, so
    nothing is created or lost.
    """
    wager = params.wager_units * count
    postings = [Posting(source, -wager)]
    retained = wager
    for meter in params.meters:
        to_meter = floor(wager * meter.rate)
        to_reserve = floor(wager * meter.reserve_rate)
        retained -= to_meter + to_reserve
        excess = 0
        if meter.limit is not None:
            room = max(0, meter.limit - balances.get(accounts.meter(meter.id), 0))
            excess = max(0, to_meter - room)
            to_meter -= excess
        if to_meter:
            postings.append(Posting(accounts.meter(meter.id), to_meter))
        if meter.above_limit is AboveLimit.RESERVE:
            to_reserve += excess
        elif excess:
            postings.append(Posting(accounts.overflow(meter.id), excess))
        if to_reserve:
            postings.append(Posting(accounts.reserve(meter.id), to_reserve))
    if retained:
        postings.append(Posting(accounts.HOUSE_RETAINED, retained))
    return tuple(postings)


def _lock(params: TableParams, state: TableState, cmd: Lock) -> Decision:
    if state.phase is not Phase.OPEN:
        return Rejected(f"round {state.round} is already locked", "already-locked", state)
    if state.closed:
        why = ", ".join(sorted(state.closed))
        return Rejected(f"the progressive is closed ({why}): LOCK refused", "closed", state)
    seats = sorted(state.sensed)
    events: list[Event] = [RoundLocked(at=cmd.at, round=state.round, seats=tuple(seats))]
    balances = state.balances
    for seat in seats:
        postings = _contribution(params, balances)
        balances = _post(balances, postings)
        events.append(
            WagerLocked(
                at=cmd.at, round=state.round, seat=seat, units=params.wager_units, postings=postings
            )
        )
    return _accept(state, events)


def _linked(params: TableParams, state: TableState, cmd: LinkedWagers) -> Decision:
    if not cmd.source_table or cmd.source_table == params.table_id:
        return Rejected("a linked contribution needs another table's id", "bad-source", state)
    if isinstance(cmd.count, bool) or not isinstance(cmd.count, int) or not 1 <= cmd.count <= 1000:
        return Rejected(f"bad wager count {cmd.count!r} (1-1000)", "bad-count", state)
    postings = _contribution(params, state.balances, cmd.count, accounts.LINKED_WAGERS)
    return _accept(
        state,
        [
            LinkedContribution(
                at=cmd.at,
                round=state.round,
                source_table=cmd.source_table,
                count=cmd.count,
                units=params.wager_units * cmd.count,
                contribution_id=cmd.contribution_id,
                postings=postings,
            )
        ],
    )


def _operator_error(
    params: TableParams,
    state: TableState,
    reason: str,
    actor: str,
    approved_by: str,
    meters: list[str],
) -> Rejected | None:
    for meter_id in meters:
        if meter_id not in params.meter_ids:
            return Rejected(
                f"no meter {meter_id!r} (meters: {', '.join(params.meter_ids)})", "bad-meter", state
            )
    if not reason.strip():
        return Rejected("a written reason is required", "no-reason", state)
    if not actor.strip() or actor in ("dealer", "system"):
        return Rejected("the operator's id is required", "no-operator", state)
    if not approved_by.strip() or approved_by == actor:
        return Rejected("a second person must approve (two-person control)", "no-approval", state)
    if state.phase is not Phase.OPEN:
        return Rejected(
            "refused while a round is open: reconcile or void it first", "round-open", state
        )
    if any(state.meter_pending(m) for m in meters):
        return Rejected("refused while an award awaits the supervisor", "award-pending", state)
    return None


def _adjust(params: TableParams, state: TableState, cmd: AdjustMeter) -> Decision:
    if error := _operator_error(params, state, cmd.reason, cmd.actor, cmd.approved_by, [cmd.meter]):
        return error
    if isinstance(cmd.units, bool) or not isinstance(cmd.units, int) or cmd.units == 0:
        return Rejected("an adjustment needs a non-zero amount", "bad-amount", state)
    before = state.balance(accounts.meter(cmd.meter))
    if before + cmd.units < 0:
        return Rejected("the adjustment would make the meter negative", "bad-amount", state)
    return _accept(
        state,
        [
            MeterAdjusted(
                at=cmd.at,
                round=state.round,
                meter=cmd.meter,
                units=cmd.units,
                meter_before=before,
                reason=cmd.reason,
                operator=cmd.actor,
                approved_by=cmd.approved_by,
                postings=(
                    Posting(accounts.adjustments(cmd.meter), -cmd.units),
                    Posting(accounts.meter(cmd.meter), cmd.units),
                ),
            )
        ],
    )


def _transfer(params: TableParams, state: TableState, cmd: TransferMeter) -> Decision:
    meters = [cmd.from_meter, cmd.to_meter]
    if error := _operator_error(params, state, cmd.reason, cmd.actor, cmd.approved_by, meters):
        return error
    if cmd.from_meter == cmd.to_meter:
        return Rejected("a transfer needs two different meters", "bad-meter", state)
    if isinstance(cmd.units, bool) or not isinstance(cmd.units, int) or cmd.units <= 0:
        return Rejected("a transfer needs a positive amount", "bad-amount", state)
    above_reset = state.balance(accounts.meter(cmd.from_meter)) - params.reset_seed(cmd.from_meter)
    if cmd.units > above_reset:
        return Rejected(
            "only the amount above the reset value may be transferred "
            f"(at most {max(0, above_reset)} units)",
            "bad-amount",
            state,
        )
    return _accept(
        state,
        [
            MeterTransferred(
                at=cmd.at,
                round=state.round,
                from_meter=cmd.from_meter,
                to_meter=cmd.to_meter,
                units=cmd.units,
                reason=cmd.reason,
                operator=cmd.actor,
                approved_by=cmd.approved_by,
                postings=(
                    Posting(accounts.meter(cmd.from_meter), -cmd.units),
                    Posting(accounts.meter(cmd.to_meter), cmd.units),
                ),
            )
        ],
    )


def _reverse(postings: Postings) -> Postings:
    return tuple(Posting(p.account, -p.units) for p in reversed(postings))


def _key(params: TableParams, state: TableState, cmd: KeyHand) -> Decision:
    if error := _seat_error(params, cmd.seat, state):
        return error
    paytable = params.paytable
    rule = paytable.rule_for(cmd.hand)
    if rule is None:
        return Rejected(
            f"hand {cmd.hand!r} is not in paytable {paytable.id} "
            f"(hands: {', '.join(paytable.hand_ids)})",
            "bad-hand",
            state,
        )
    if state.phase is not Phase.LOCKED:
        return Rejected("no round is locked: key winners after LOCK", "not-locked", state)
    seat, hand = cmd.seat, rule.hand.value

    # A second press of the same seat and hand turns it off.
    for keyed in state.keyed:
        if (keyed.seat, keyed.hand) == (seat, hand):
            unkeyed = HandUnkeyed(
                at=cmd.at,
                round=state.round,
                seat=seat,
                hand=hand,
                source=keyed.source,
                units=keyed.units,
            )
            return _accept(state, [unkeyed])
    for award in state.awards:
        if (award.seat, award.hand) == (seat, hand):
            if award.confirmed:
                return Rejected(
                    f"the {hand} award at seat {seat} was confirmed by the supervisor; "
                    "it cannot be turned off",
                    "award-confirmed",
                    state,
                )
            wanted = [(a.seat, a.hand) for a in state.unpaid if (a.seat, a.hand) != (seat, hand)]
            return _reprice(params, state, wanted, cmd.at, {(seat, hand): "unkeyed"})

    # A new winner: refuse what one deck cannot deal.
    current = [k.hand for k in state.keyed if k.seat == seat] + [
        a.hand for a in state.awards if a.seat == seat
    ]
    if current:
        return Rejected(
            f"seat {seat} is already keyed as {current[0]}; press {current[0]} again to turn it "
            "off first",
            "seat-already-keyed",
            state,
        )
    guard = deck.guard_for(paytable)
    held = [k.hand for k in state.keyed] + [a.hand for a in state.awards]
    if (impossible := guard.impossible([*held, hand])) is not None:
        return Rejected(guard.reason(impossible), "impossible-combination", state)
    if seat not in state.locked:
        if rule.envy and not paytable.envy_requires_trigger_wager:
            return _accept(
                state,
                [
                    HandKeyed(
                        at=cmd.at, round=state.round, seat=seat, hand=hand, source="none", units=0
                    )
                ],
            )
        why = (
            "it has no envy bonus"
            if not rule.envy
            else f"the trigger must hold a wager ({paytable.envy_rule})"
        )
        return Rejected(
            f"seat {seat} has no locked progressive wager; {hand} there pays nothing and cannot "
            f"trigger envy: {why}",
            "no-wager",
            state,
        )
    if rule.pay.from_meter:
        wanted = [(a.seat, a.hand) for a in state.unpaid] + [(seat, hand)]
        return _reprice(params, state, wanted, cmd.at, {})
    units = rule.pay.tray_amount(params.wager_units, paytable.wager)
    return _accept(
        state,
        [HandKeyed(at=cmd.at, round=state.round, seat=seat, hand=hand, source="tray", units=units)],
    )


def _ordered(params: TableParams, wanted: Sequence[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Pending awards as groups in handling order.

    Sequential: one award per group, by seat in the configured order. Split: awards for
    the same hand and meter form one group, handled at the turn of its first member.
    """
    by_seat = sorted(wanted, key=lambda sh: params.order_key(sh[0]))
    if params.policy is Policy.SEQUENTIAL:
        return [[sh] for sh in by_seat]
    groups: list[list[tuple[int, str]]] = []
    index: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for seat, hand in by_seat:
        rule = params.paytable.rule_for(hand)
        assert rule is not None
        key = (hand, rule.pay.meter)
        if key not in index:
            index[key] = []
            groups.append(index[key])
        index[key].append((seat, hand))
    return groups


def _award_events(
    params: TableParams,
    balances: Mapping[str, int],
    group: list[tuple[int, str]],
    at: str,
    round_no: int,
    first_order: int,
) -> tuple[list[AwardKeyed], Mapping[str, int]]:
    """Key one group of awards on the meter as it stands; returns events and new balances."""
    rule = params.paytable.rule_for(group[0][1])
    assert rule is not None
    meter_id = rule.pay.meter
    meter_acc = accounts.meter(meter_id)
    whole = truncate_to_cent(floor(balances.get(meter_acc, 0) * rule.pay.percent))
    whole_cents = whole // UNITS_PER_CENT
    count = len(group)
    share, odd = divmod(whole_cents, count)
    events: list[AwardKeyed] = []
    for index, (seat, hand) in enumerate(group):
        units = (share + (odd if index == 0 else 0)) * UNITS_PER_CENT
        before = balances.get(meter_acc, 0)
        postings = [Posting(meter_acc, -units), Posting(accounts.pending(meter_id), units)]
        reset_reserve = reset_seed = 0
        if rule.pay.percent == 1 and index == count - 1:
            reset_reserve = balances.get(accounts.reserve(meter_id), 0)
            reset_seed = params.reset_seed(meter_id)
            if reset_reserve:
                postings += [
                    Posting(accounts.reserve(meter_id), -reset_reserve),
                    Posting(meter_acc, reset_reserve),
                ]
            postings += [
                Posting(accounts.seed_funding(meter_id), -reset_seed),
                Posting(meter_acc, reset_seed),
            ]
        frozen = tuple(postings)
        balances = _post(balances, frozen)
        events.append(
            AwardKeyed(
                at=at,
                round=round_no,
                seat=seat,
                hand=hand,
                meter=meter_id,
                units=units,
                meter_before=before,
                meter_after=balances.get(meter_acc, 0),
                reset_reserve=reset_reserve,
                reset_seed=reset_seed,
                order=first_order + index,
                share_of=count,
                postings=frozen,
            )
        )
    return events, balances


def _reprice(
    params: TableParams,
    state: TableState,
    wanted: Sequence[tuple[int, str]],
    at: str,
    reasons: Mapping[tuple[int, str], str],
) -> Accepted:
    """Bring the pending meter awards to ``wanted`` (a set of seat/hand pairs).

    Awards keep their locked amounts unless something ahead of them in the order changed;
    from the first difference on, the old awards are reversed last-first and keyed again
    on the meter as it then stands, so every meter movement is an exact, recorded posting.
    """
    old = state.unpaid
    confirmed = len(state.awards) - len(old)
    groups = _ordered(params, wanted)
    new_flat = [(sh, len(g), g[0]) for g in groups for sh in g]
    old_flat = [((a.seat, a.hand), a.share_of) for a in old]
    # The first place where the order or a split group differs.
    keep = 0
    while (
        keep < len(old_flat)
        and keep < len(new_flat)
        and old_flat[keep][0] == new_flat[keep][0]
        and old_flat[keep][1] == new_flat[keep][1]
    ):
        keep += 1
    # A split group partly kept must be priced again as a whole.
    while keep > 0 and keep < len(new_flat) and new_flat[keep][2] == new_flat[keep - 1][2]:
        keep -= 1
    events: list[Event] = []
    balances = state.balances
    for award in reversed(old[keep:]):
        meter_acc = accounts.meter(award.meter)
        before = balances.get(meter_acc, 0)
        postings = _reverse(award.postings)
        balances = _post(balances, postings)
        events.append(
            AwardReversed(
                at=at,
                round=state.round,
                seat=award.seat,
                hand=award.hand,
                meter=award.meter,
                units=award.units,
                meter_before=before,
                meter_after=balances.get(meter_acc, 0),
                reason=reasons.get((award.seat, award.hand), "repriced"),
                postings=postings,
            )
        )
    start = 0
    for group in groups:
        if start >= keep:
            keyed, balances = _award_events(
                params, balances, group, at, state.round, confirmed + start
            )
            events.extend(keyed)
        start += len(group)
    return _accept(state, events)


def _supervisor_error(state: TableState, supervisor: bool, what: str) -> Rejected | None:
    if not supervisor:
        return Rejected(f"{what} needs the supervisor key", "supervisor-required", state)
    return None


def _confirm(params: TableParams, state: TableState, cmd: Confirm) -> Decision:
    if error := _supervisor_error(state, cmd.supervisor, "CONFIRM"):
        return error
    pending = state.pending
    if not pending:
        return Rejected("no meter award awaits the supervisor", "nothing-pending", state)
    award = pending[0]
    if params.policy is Policy.SPLIT:
        # Approved, paid at RECONCILE: a split share is final only with the round's keyed set.
        approval = AwardApproved(
            at=cmd.at,
            round=state.round,
            seat=award.seat,
            hand=award.hand,
            meter=award.meter,
            units=award.units,
            by=cmd.actor,
        )
        return _accept(state, [approval])
    return _accept(
        state,
        [
            AwardConfirmed(
                at=cmd.at,
                round=state.round,
                seat=award.seat,
                hand=award.hand,
                meter=award.meter,
                units=award.units,
                by=cmd.actor,
                postings=(
                    Posting(accounts.pending(award.meter), -award.units),
                    Posting(accounts.paid_attendant(award.meter), award.units),
                ),
            )
        ],
    )


def _reject(params: TableParams, state: TableState, cmd: Reject) -> Decision:
    if error := _supervisor_error(state, cmd.supervisor, "REJECT"):
        return error
    pending = state.pending
    if not pending:
        return Rejected("no meter award awaits the supervisor", "nothing-pending", state)
    first = (pending[0].seat, pending[0].hand)
    wanted = [(a.seat, a.hand) for a in state.unpaid if (a.seat, a.hand) != first]
    return _reprice(params, state, wanted, cmd.at, {first: "rejected"})


def _same_player(params: TableParams, state: TableState, cmd: SamePlayer) -> Decision:
    for seat in sorted(cmd.seats, key=str):
        if error := _seat_error(params, seat, state):
            return error
    if len(cmd.seats) < 2:
        return Rejected("SAME-PLAYER needs two different seats", "bad-seat", state)
    group = frozenset(cmd.seats)
    for existing in state.same_player:
        if existing & group:
            group |= existing
    if any(group == g for g in state.same_player):
        return Accepted((), state)
    most = params.paytable.max_hands_per_player
    if most is not None and len(group) > most:
        seats = ", ".join(str(s) for s in sorted(group))
        return Rejected(
            f"one player may play at most {most} hands ({params.paytable.hands_per_player_rule}); "
            f"seats {seats} would be one player",
            "too-many-hands",
            state,
        )
    return _accept(state, [SpotsJoined(at=cmd.at, round=state.round, seats=tuple(sorted(group)))])


def _envy_units(params: TableParams, rule: HandRule) -> int:
    return scale_amount(rule.envy, params.wager_units, params.paytable.wager)


def _pay_approved(state: TableState, at: str) -> list[Event]:
    """Split policy: the approved awards, now final, paid by an attendant at RECONCILE."""
    by = {(seat, hand): who for seat, hand, who in state.approved}
    return [
        AwardConfirmed(
            at=at,
            round=state.round,
            seat=award.seat,
            hand=award.hand,
            meter=award.meter,
            units=award.units,
            by=by[(award.seat, award.hand)],
            postings=(
                Posting(accounts.pending(award.meter), -award.units),
                Posting(accounts.paid_attendant(award.meter), award.units),
            ),
        )
        for award in state.awards
        if (award.seat, award.hand) in by
    ]


def _reconcile(params: TableParams, state: TableState, cmd: Reconcile) -> Decision:
    if state.phase is not Phase.LOCKED:
        return Rejected("no locked round to reconcile", "not-locked", state)
    if pending := state.pending:
        return Rejected(
            f"the {pending[0].hand} award at seat {pending[0].seat} awaits the supervisor",
            "award-pending",
            state,
        )
    order = params.seat_order()
    settlement: list[Payment] = []
    events: list[Event] = _pay_approved(state, cmd.at)
    for seat in order:
        for award in state.awards:
            if award.seat == seat:
                settlement.append(Payment(seat, award.hand, "meter", award.units))
        for keyed in state.keyed:
            if keyed.seat == seat and keyed.source == "tray":
                settlement.append(Payment(seat, keyed.hand, "tray", keyed.units))
                events.append(
                    TrayPaid(
                        at=cmd.at,
                        round=state.round,
                        seat=seat,
                        hand=keyed.hand,
                        units=keyed.units,
                        postings=(
                            Posting(accounts.TRAY, -keyed.units),
                            Posting(accounts.PAID_TRAY, keyed.units),
                        ),
                    )
                )
    triggers = sorted(
        [(k.seat, k.hand) for k in state.keyed] + [(a.seat, a.hand) for a in state.awards],
        key=lambda sh: params.order_key(sh[0]),
    )
    for seat in order:
        if seat not in state.locked:
            continue
        for trigger_seat, hand in triggers:
            rule = params.paytable.rule_for(hand)
            assert rule is not None
            if not rule.envy or trigger_seat in state.player_of(seat):
                continue
            units = _envy_units(params, rule)
            settlement.append(Payment(seat, hand, "envy", units, trigger_seat))
            events.append(
                EnvyPaid(
                    at=cmd.at,
                    round=state.round,
                    seat=seat,
                    hand=hand,
                    from_seat=trigger_seat,
                    units=units,
                    postings=(
                        Posting(accounts.TRAY, -units),
                        Posting(accounts.PAID_ENVY, units),
                    ),
                )
            )
    events.append(
        RoundReconciled(
            at=cmd.at,
            round=state.round,
            settlement=tuple(settlement),
            seats=tuple(sorted(state.locked)),
        )
    )
    return _accept(state, events)


def _void(params: TableParams, state: TableState, cmd: Void) -> Decision:
    if error := _supervisor_error(state, cmd.supervisor, "VOID"):
        return error
    if state.phase is not Phase.LOCKED:
        return Rejected("no locked round to void", "not-locked", state)
    if any(a.confirmed for a in state.awards):
        return Rejected(
            "a meter award was confirmed and paid this round; a void cannot reverse it "
            "(use a recorded meter adjustment)",
            "award-confirmed",
            state,
        )
    reversal = _reprice(
        params, state, [], cmd.at, {(a.seat, a.hand): "voided" for a in state.pending}
    )
    events: list[Event] = list(reversal.events)
    for seat, postings in reversed(state.wager_postings):
        events.append(
            WagerRefunded(
                at=cmd.at,
                round=state.round,
                seat=seat,
                units=params.wager_units,
                postings=_reverse(postings),
            )
        )
    events.append(RoundVoided(at=cmd.at, round=state.round, by=cmd.actor))
    return _accept(state, events)


def _set_closed(state: TableState, cmd: SetClosed) -> Decision:
    reason = cmd.reason.strip()
    if not reason:
        return Rejected("a reason is needed to close or open the progressive", "no-reason", state)
    if cmd.closed:
        if reason in state.closed:
            return Accepted((), state)
        return _accept(state, [TableClosed(at=cmd.at, round=state.round, reason=reason)])
    if reason not in state.closed:
        return Accepted((), state)
    return _accept(state, [TableOpened(at=cmd.at, round=state.round, reason=reason)])
