"""The link's fair inbox and refusal budget (progressived/link/runtime/inbox.py, refusals.py):
bounded lanes, each table's turn in every batch, order kept, time never backwards, a rate
per lane; refusals counted, not journaled, their answers within a budget per table."""

from __future__ import annotations

from progressived.link.core import batch as lb
from progressived.link.core import book
from progressived.link.core.messages import encode, from_table_topic
from progressived.link.runtime.inbox import STRANGERS, FairInbox
from progressived.link.runtime.refusals import NOT_A_MEMBER, Refusals
from tests.link_sim import LINK_HEAD, SimTable, link_params

PREFIX, LINK = "progressive", "link-a"


def item(table: str, n: int, at_ms: int | None = None) -> lb.Incoming:
    return lb.Incoming(f"{PREFIX}/link/{LINK}/from/{table}", str(n).encode(), at_ms or n)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def inbox(**kw: int) -> FairInbox:
    return FairInbox({"t1", "t2", "t3"}, clock=Clock(), **kw)


def test_a_flooding_table_gets_its_share_and_the_others_theirs_in_the_same_batch() -> None:
    box = inbox(lane_max=1000, share_max=1000, burst=10_000)
    for n in range(1, 1001):
        box.offer("t1", item("t1", n))
    box.offer("t2", item("t2", 5000))
    batch = box.take(100)
    tables = [lb.sender_of(PREFIX, LINK, i.topic) for i in batch]
    assert len(batch) == 100 and tables.count("t2") == 1  # t2's one message, not after 1,000
    assert [i.payload for i in batch if i.topic.endswith("t1")] == [
        str(n).encode() for n in range(1, 100)
    ]  # a table's messages in order


def test_a_full_lane_drops_and_counts_and_costs_no_other_lane() -> None:
    box = inbox(lane_max=3)
    assert [box.offer("t1", item("t1", n)) for n in range(1, 6)] == [True] * 3 + [False] * 2
    assert box.offer("t2", item("t2", 9))
    assert box.dropped == {"t1": 2} and box.qsize() == 4 and box.high_water == 4
    assert box.depths() == {"t1": 3, "t2": 1}


def test_topics_naming_no_member_share_one_small_lane() -> None:
    box = inbox(strangers_max=2)
    results = [box.offer(f"x{n}", item(f"x{n}", n)) for n in range(5)]
    assert results == [True, True, False, False, False]
    assert box.dropped == {STRANGERS: 3}
    assert len(box.take(10)) == 2 and box.depths() == {}


def test_no_lane_gives_a_batch_more_than_its_share() -> None:
    box = inbox(share_max=4, burst=100)
    for n in range(1, 20):
        box.offer("t1", item("t1", n))
    assert len(box.take(100)) == 4
    assert len(box.take(100)) == 4


def test_a_lane_hands_the_book_at_most_its_rate() -> None:
    clock = Clock()
    box = FairInbox({"t1", "t2"}, share_max=100, rate_per_s=10.0, burst=5, clock=clock)
    for n in range(1, 50):
        box.offer("t1", item("t1", n))
    assert len(box.take(100)) == 5  # the burst
    assert box.take(100) == [] and box.ready_in() == 0.1
    box.offer("t2", item("t2", 99))
    assert [i.payload for i in box.take(100)] == [b"99"]  # another table is not held back
    clock.now = 1.0
    assert len(box.take(100)) == 5  # capped at the burst again
    assert box.qsize() == 49 - 10


def test_receive_times_never_go_back_across_batches() -> None:
    box = inbox(burst=100)
    box.offer("t1", item("t1", 1, at_ms=500))
    assert [i.at_ms for i in box.take(10)] == [500]
    box.offer("t2", item("t2", 2, at_ms=400))  # received earlier, queued behind
    box.offer("t2", item("t2", 3, at_ms=600))
    assert [i.at_ms for i in box.take(10)] == [500, 600]


def test_refusals_are_counted_and_left_out_of_the_steps_to_journal() -> None:
    params = link_params(2)
    state, head = book.open_book(params), LINK_HEAD
    t1 = from_table_topic(PREFIX, params.link_id, "t1")
    junk = [lb.Incoming(t1, b"{not json", n) for n in range(1, 4)]
    good = lb.Incoming(t1, encode(SimTable("t1").contribute(1)), 4)
    out = lb.run_batch(params, state, head, [*junk, good], PREFIX)
    assert [e.kind for step, _ in out.steps for e in step.events] == ["link_applied"]
    assert len(out.refusals) == 3 and out.needs_commit
    assert [r.non_final_to for r in out.replies] == ["t1", "t1", "t1", ""]
    refusals = Refusals(params.tables, burst=2, per_s=1.0, clock=Clock())
    refusals.note(out)
    assert refusals.by_table == {("t1", "bad-json"): 3}
    kept = refusals.answers(out.replies)
    assert [r.non_final_to for r in kept] == ["t1", "t1", ""]  # the budget: 2, then 1 a second
    assert refusals.answers_dropped == {"t1": 1}
    assert refusals.label("stranger") == NOT_A_MEMBER
