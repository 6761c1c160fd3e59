"""The pure link book: exactly-once over a faulty relay, jackpot lock, reject, split, refusals."""

from __future__ import annotations

from dataclasses import replace
from math import floor

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from progressived.core.money import UNITS_PER_CENT, truncate_to_cent
from progressived.core.params import Policy
from progressived.engine import accounts
from progressived.link.core import book, effects
from progressived.link.core import params as lp
from progressived.link.core.messages import (
    Claim,
    ClaimConfirm,
    Contribution,
    Result,
    Reversal,
    TableMessage,
    encode,
)
from progressived.link.core.state import BookState, Step
from tests.budget import examples
from tests.link_sim import LINK_HEAD, METER, SEED, WAGER, SimTable, deliver, head_of, link_params

MA, RA, PA = accounts.meter(METER), accounts.reserve(METER), accounts.pending(METER)
PAID, SF = accounts.paid_attendant(METER), accounts.seed_funding(METER)


def check(params: lp.LinkParams, state: BookState) -> None:
    """The invariants that hold after every step."""
    assert book.identity_gaps(params, state) == {METER: 0}
    assert sum(state.balances.values()) == 0
    for account in lp.holders(METER):
        assert state.balances.get(account, 0) >= 0, account
    paid = sum(c.units for c in state.claims.values() if c.state == "paid")
    assert state.balances.get(PAID, 0) == paid
    held = sum(c.units for c in state.claims.values() if c.state == "pending")
    assert state.balances.get(PA, 0) == held


def result(step: Step) -> Result:
    first = step.replies[0]
    assert isinstance(first, Result)
    return first


# -- the faulty relay ---------------------------------------------------------------------

OPS = ["contrib"] * 5 + ["claim", "sf", "confirm", "reject", "reverse"]


def _make(table: SimTable, op: str, arg: int) -> TableMessage:
    if op == "claim":
        return table.claim("royal-flush", seat=1 + arg % 7)
    if op == "sf":
        return table.claim("straight-flush", seat=1 + arg % 7)
    if op in ("confirm", "reject") and table.claims:
        claim_id = table.claims[arg % len(table.claims)]
        return table.confirm(claim_id) if op == "confirm" else table.reject(claim_id)
    if op == "reverse" and table.contributions:
        # a table reverses the round still open: one of its last few contributions
        recent = table.contributions[-effects.REVERSIBLE :]
        return table.reverse(recent[arg % len(recent)])
    return table.contribute(1 + arg % 7)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_faulty_relay_counts_every_contribution_exactly_once(data: st.DataObject) -> None:
    """40 random relays here; the reliability suite runs thousands
    (tests/reliability/test_link_relay.py)."""
    relay_case(data)


def relay_case(data: st.DataObject) -> None:
    """Random tables, policy and operations through a relay that loses, repeats and
    reorders: every contribution counted exactly once, the invariants after every step."""
    n = data.draw(st.integers(2, 4), label="tables")
    policy = data.draw(st.sampled_from(list(Policy)), label="policy")
    params = link_params(n, policy, window_ms=data.draw(st.integers(0, 40)))
    tables = {t: SimTable(t) for t in sorted(params.tables)}
    names = sorted(tables)
    state = book.open_book(params)
    network: list[TableMessage] = []
    clock = 0
    last_meter = (0, state.balances[MA])
    hwm = dict.fromkeys(names, 0)

    def step(msg: TableMessage, lose_reply: bool) -> None:
        nonlocal state, clock, last_meter
        clock += 3
        before = state
        out = deliver(params, state, msg, clock)
        state = out.state
        check(params, state)
        if out.events == ():
            assert state is before  # repeats, gaps and refusals change nothing
            event("repeat or gap seen")
        view = book.meter_view(params, state, METER, LINK_HEAD)
        new_group = state.groups.get(state.lseq)
        if new_group is not None and new_group.id not in before.groups:
            # No award is smaller than its share of a value the signs showed before the claim.
            percent = params.meters[0].hands[new_group.hand]
            assert new_group.total == truncate_to_cent(floor(last_meter[1] * percent))
            event("claim priced on the shown meter")
        if view.epoch == last_meter[0]:
            assert view.units >= last_meter[1], "a sign would go backwards within an epoch"
        assert view.epoch >= last_meter[0]
        last_meter = (view.epoch, view.units)
        for t in names:
            track = state.tables.get(t)
            assert (track.hwm if track else 0) >= hwm[t]
            hwm[t] = track.hwm if track else 0
        if lose_reply:
            return
        for reply in out.replies:
            if isinstance(reply, Result):
                network.extend(tables[reply.table].on_reply(reply))

    def rogue(data: st.DataObject) -> None:
        """A forged, malformed or stale message in the stream: refused, nothing changes."""
        sender, victim = names[0], names[-1]
        kind = data.draw(st.sampled_from(["garbage", "forged", "stranger", "future", "stale"]))
        payload: bytes = b'{"type":"contribution","seq":1}'
        topic = sender
        if kind == "forged" and tables[victim].sent:
            payload = encode(replace(tables[victim].sent[-1], seq=10**6))
        elif kind == "stranger":
            payload = encode(replace(SimTable("t99").contribute(1), seq=1))
            topic = "t99"
        elif kind == "stale" and hwm[sender] >= 1:  # a rewrite of a message already applied
            payload = encode(replace(tables[sender].sent[0], id="rewritten"))
        elif kind == "future":
            payload = encode(replace(SimTable(sender).contribute(9), seq=10**9))
        out = book.receive(params, state, payload, topic_table=topic, at_ms=clock, head=LINK_HEAD)
        assert out.state is state
        assert all(isinstance(r, Result) and r.status in ("refused", "resend") for r in out.replies)

    actions = data.draw(
        st.lists(
            st.sampled_from(["make", "make", "deliver", "deliver", "deliver", "dup", "drop",
                             "retransmit", "rogue"]),
            min_size=60,
            max_size=300,
        ),
        label="relay",
    )  # fmt: skip
    for action in actions:
        if action == "make":
            table = tables[names[data.draw(st.integers(0, n - 1))]]
            network.append(
                _make(table, data.draw(st.sampled_from(OPS)), data.draw(st.integers(0, 99)))
            )
        elif action == "rogue":
            rogue(data)
        elif action == "retransmit":
            for table in tables.values():
                network.extend(table.outbox[s] for s in sorted(table.outbox))
        elif network:
            index = data.draw(st.integers(0, len(network) - 1))
            if action == "dup":
                network.append(network[index])
            elif action == "drop":
                network.pop(index)
            else:
                step(network.pop(index), data.draw(st.booleans()))
    # The relay heals: tables retransmit until every message has its result.
    for _ in range(50):
        if not any(t.outbox for t in tables.values()):
            break
        network = [m for t in tables.values() for m in (t.outbox[s] for s in sorted(t.outbox))]
        while network:
            step(network.pop(0), False)
    assert not any(t.outbox for t in tables.values())

    expected = 0
    applied_contributions: set[tuple[str, str]] = set()
    for table in tables.values():
        mine: list[str] = []
        assert sorted(table.results) == list(range(1, table.seq + 1))
        by_id = {m.id: m for m in table.sent}
        for seq, got in sorted(table.results.items()):
            assert all(r == got[0] for r in got), "a repeat got a different result"
            msg = table.sent[seq - 1]
            if got[0].status != "applied":
                continue
            if isinstance(msg, Contribution):
                expected += msg.wagers[0].units
                mine.append(msg.id)
            elif isinstance(msg, Reversal):
                reversed_msg = by_id[msg.of]
                assert isinstance(reversed_msg, Contribution)
                expected -= reversed_msg.wagers[0].units
        applied_contributions.update((table.table, i) for i in mine[-effects.REVERSIBLE :])
    assert -state.balances.get(lp.linked_wagers(METER), 0) == expected
    # Both sides agree on every amount paid: the table takes it from the confirm's result.
    paid_by_tables = 0
    for table in tables.values():
        for seq, got in table.results.items():
            if isinstance(table.sent[seq - 1], ClaimConfirm) and got[0].status == "applied":
                (award,) = got[0].awards
                assert award.state == "paid"
                assert award.units == state.claims[(table.table, award.claim)].units
                paid_by_tables += award.units
    assert paid_by_tables == state.balances.get(PAID, 0)
    event(f"messages per example: {sum(t.seq for t in tables.values()) // 10 * 10}+")
    event(f"claims priced: {min(len(state.groups), 3)}+")
    # The link keeps each table's last few contributions, reversible (a void's round).
    assert {
        (t, i) for t, kept in state.contributions.items() for i in kept
    } == applied_contributions


# -- concrete cases -----------------------------------------------------------------------


def _run(params: lp.LinkParams, state: BookState, *msgs: TableMessage, at_ms: int = 0) -> Step:
    out = Step(state, (), ())
    for msg in msgs:
        out = deliver(params, out.state, msg, at_ms)
        check(params, out.state)
    return out


def test_jackpot_lock_freezes_the_award_and_resets_the_meter_at_once() -> None:
    params = link_params()
    t1, t2 = SimTable("t1"), SimTable("t2")
    out = _run(params, book.open_book(params), t1.contribute(100), t2.contribute(50))
    meter, reserve = out.state.balances[MA], out.state.balances[RA]
    assert meter == SEED + 150 * WAGER * 3 // 100 and reserve == 150 * WAGER // 200
    out = _run(params, out.state, t2.claim())
    (award,) = result(out).awards
    assert award.units == truncate_to_cent(meter) and award.state == "pending"
    assert out.state.balances[MA] == SEED + reserve + meter - award.units  # the sub-cent stays
    assert book.meter_view(params, out.state, METER, LINK_HEAD).hit is not None
    # Other tables keep playing on the reset meter while the claim is pending.
    out = _run(params, out.state, t1.contribute(10))
    assert out.state.balances[PA] == award.units
    confirmed = _run(params, out.state, t2.confirm(t2.claims[0]))
    assert confirmed.state.balances[PAID] == award.units and confirmed.state.balances[PA] == 0
    # No award paid twice: a second confirm is refused and changes no money.
    again = _run(params, confirmed.state, t2.confirm(t2.claims[0]))
    assert result(again).status == "refused" and result(again).code == "already-paid"
    assert again.state.balances == confirmed.state.balances


def test_reject_restores_the_meter_exactly_keeping_contributions_in_between() -> None:
    params = link_params()
    t1, t2 = SimTable("t1"), SimTable("t2")
    out = _run(params, book.open_book(params), t1.contribute(333))
    before = dict(out.state.balances)
    out = _run(params, out.state, t2.claim(), t1.contribute(7))
    epoch = book.meter_view(params, out.state, METER, LINK_HEAD).epoch
    out = _run(params, out.state, t2.reject(t2.claims[0]))
    share = 7 * WAGER * 3 // 100
    assert out.state.balances[MA] == before[MA] + share
    assert out.state.balances[RA] == before[RA] + 7 * WAGER // 200
    assert out.state.balances[SF] == before[SF] and out.state.balances[PA] == 0
    view = book.meter_view(params, out.state, METER, LINK_HEAD)
    assert view.epoch == epoch + 1
    assert view.hit is None  # the withdrawn award names no winner on the signs any more
    assert result(out).awards[0].state == "rejected"
    assert result(out).awards[0].units == 0  # a rejected claim holds nothing


def test_claims_from_two_tables_are_ordered_by_the_link_log_sequential() -> None:
    params = link_params()
    t1, t2 = SimTable("t1"), SimTable("t2")
    out = _run(params, book.open_book(params), t1.contribute(100))
    first = _run(params, out.state, t2.claim())
    second = _run(params, first.state, t1.claim())
    a, b = result(first).awards[0], result(second).awards[0]
    assert a.order < b.order and a.share_of == b.share_of == 1
    assert b.units == truncate_to_cent(SEED + 100 * WAGER // 200)  # the meter at its turn


def test_split_window_shares_one_award_and_the_odd_cent_goes_first() -> None:
    params = link_params(policy=Policy.SPLIT, window_ms=1_000)
    t1, t2, t3 = SimTable("t1"), SimTable("t2"), SimTable("t3")
    out = _run(params, book.open_book(params), t1.contribute(1))  # meter 1000.03
    whole = truncate_to_cent(out.state.balances[MA])
    first = deliver(params, out.state, t2.claim(), at_ms=10_000)
    joined = deliver(params, first.state, t1.claim(), at_ms=10_900)
    check(params, joined.state)
    mine = result(joined).awards[0]
    (update,) = [r for r in joined.replies if not isinstance(r, Result)]
    assert update.table == "t2" and update.award.share_of == mine.share_of == 2
    cents = whole // UNITS_PER_CENT
    assert update.award.units == (cents // 2 + cents % 2) * UNITS_PER_CENT
    assert mine.units == cents // 2 * UNITS_PER_CENT
    assert update.award.units + mine.units == whole
    # Outside the window: a new award on the meter as it stands.
    late = deliver(params, joined.state, t3.claim(), at_ms=11_001)
    assert result(late).awards[0].share_of == 1
    assert result(late).awards[0].units == truncate_to_cent(joined.state.balances[MA])
    # A member rejected before anyone is paid: the other gets the whole award again.
    back = deliver(params, joined.state, t1.reject(t1.claims[0]), at_ms=11_100)
    check(params, back.state)
    assert back.state.claims[("t2", t2.claims[0])].units == whole


def test_split_confirm_fixes_the_shares() -> None:
    params = link_params(policy=Policy.SPLIT)
    t1, t2 = SimTable("t1"), SimTable("t2")
    out = _run(params, book.open_book(params), t1.contribute(2), t1.claim(), t2.claim())
    mine = out.state.claims[("t1", t1.claims[0])].units
    theirs = out.state.claims[("t2", t2.claims[0])].units
    assert mine >= theirs > 0
    out = _run(params, out.state, t1.confirm(t1.claims[0]))
    meter = out.state.balances[MA]
    out = _run(params, out.state, t2.reject(t2.claims[0]))
    assert out.state.balances[PAID] == mine  # a paid share is never changed afterwards
    assert out.state.balances[MA] == meter + theirs  # the rejected share goes back
    assert out.state.balances[PA] == 0


def test_reversal_keeps_the_meter_share_and_reverses_once() -> None:
    params = link_params()
    t1 = SimTable("t1")
    out = _run(params, book.open_book(params), t1.contribute(10))
    meter = out.state.balances[MA]
    out = _run(params, out.state, t1.reverse(t1.contributions[0]))
    assert result(out).status == "applied"
    assert out.state.balances[MA] == meter  # a meter is only decreased by an award
    assert out.state.balances.get(lp.linked_wagers(METER), 0) == 0
    assert out.state.balances[RA] == 0
    again = _run(params, out.state, t1.reverse(t1.contributions[0]))
    assert result(again).code == "already-reversed"
    assert again.state.balances == out.state.balances


def test_repeat_returns_the_stored_result_and_a_gap_asks_for_a_resend() -> None:
    params = link_params()
    t1 = SimTable("t1")
    m1, m2, m3 = t1.contribute(1), t1.contribute(2), t1.contribute(3)
    out = _run(params, book.open_book(params), m1)
    gap = deliver(params, out.state, m3)
    assert gap.state is out.state and result(gap).status == "resend"
    assert result(gap).resend_from == 2
    repeat = deliver(params, out.state, m1)
    assert repeat.state is out.state and repeat.replies == out.replies
    healed = _run(params, out.state, m2, m3)
    assert healed.state.tables["t1"].hwm == 3 and result(healed).status == "applied"


def _unchanged(params: lp.LinkParams, state: BookState, payload: bytes | str, table: str) -> str:
    out = book.receive(params, state, payload, topic_table=table, at_ms=0, head=LINK_HEAD)
    assert out.state is state
    assert out.events and out.events[0].kind == "link_refused"
    reply = result(out)
    assert reply.status == "refused" and reply.reason
    return reply.code


def test_forged_malformed_and_out_of_range_messages_change_nothing() -> None:
    params = link_params(keep_results=2)
    t1, t2 = SimTable("t1"), SimTable("t2")
    state = _run(params, book.open_book(params), *(t1.contribute(1) for _ in range(4))).state
    assert _unchanged(params, state, b"{not json", "t1") == "bad-json"
    assert _unchanged(params, state, encode(t2.contribute(1)), "t1") == "forged"
    stranger = replace(t2.contribute(1), table="t9")
    assert _unchanged(params, state, encode(stranger), "t9") == "unknown-table"
    assert _unchanged(params, state, encode(t1.sent[0]), "t1") == "too-old"
    conflict = replace(t1.sent[3], id="other")
    assert _unchanged(params, state, encode(conflict), "t1") == "conflict"
    back = replace(t1.contribute(1), head=head_of("t1", 1))
    assert _unchanged(params, state, encode(back), "t1") == "head-regressed"


def test_claims_the_link_cannot_price_are_refused_without_money_moving() -> None:
    params = link_params()
    t1 = SimTable("t1")
    state = _run(params, book.open_book(params), t1.contribute(5)).state
    for claim in (
        replace(t1.claim(), hand="four-of-a-kind"),
        replace(t1.claim(), meter="other"),
    ):
        assert isinstance(claim, Claim)
        out = deliver(params, state, claim)
        assert result(out).status == "refused"
        assert result(out).code in ("unknown-hand", "unknown-meter")
        assert out.state.balances == state.balances and out.state.claims == state.claims
        assert out.state.tables["t1"].hwm == claim.seq  # a final answer: the table moves on
        state = out.state
    unknown = deliver(params, state, t1.confirm("t1-c99"))
    assert result(unknown).code == "unknown-claim"
    assert unknown.state.balances == state.balances


def test_limit_sends_the_excess_to_the_reserve() -> None:
    params = link_params(limit=SEED + 2 * WAGER * 3 // 100)
    t1 = SimTable("t1")
    out = _run(params, book.open_book(params), t1.contribute(5))
    assert out.state.balances[MA] == params.meters[0].limit
    assert out.state.balances[RA] == 5 * WAGER // 200 + 3 * WAGER * 3 // 100


def test_reject_after_a_later_claim_returns_only_the_award() -> None:
    """The later claim was priced on the reset meter: the reset stays where it went."""
    params = link_params()
    t1, t2 = SimTable("t1"), SimTable("t2")
    out = _run(params, book.open_book(params), t1.contribute(40), t1.claim())
    award = out.state.claims[("t1", t1.claims[0])].units
    out = _run(params, out.state, t2.claim("straight-flush"))
    meter, funding = out.state.balances[MA], out.state.balances[SF]
    out = _run(params, out.state, t1.reject(t1.claims[0]))
    assert out.state.balances[MA] == meter + award
    assert out.state.balances[SF] == funding  # the reset is not taken back
    # The later claim rejected too: now it is the latest, and its restore is exact.
    sf = out.state.claims[("t2", t2.claims[0])].units
    out = _run(params, out.state, t2.reject(t2.claims[0]))
    assert out.state.balances[MA] == meter + award + sf
