"""The link controller's inbox: one bounded lane per member table, served in turn.

Why: one member's account flooding the link (junk, or valid messages at a rate no dealer
keys) must cost the other tables nothing but their turn. A single FIFO put every table
behind the flood (seconds of delay, memory growing with the backlog, heartbeats late);
here each table waits only behind its own messages (docs/link.md, "Fair share").

* :meth:`FairInbox.offer` is all the broker's message callback does: it files the message
  under the table its topic names (the broker's ACL lets an account write only its own
  name there, docs/mqtt.md, so the topic attributes it) and never waits. A lane holds at
  most ``lane_max`` messages; beyond that the message is dropped and counted (the table's
  outbox sends it again: a member loses nothing it has not sent twice). A topic naming no
  member shares one small lane (``STRANGERS``): such a sender still gets its
  ``unknown-table`` answer, and no name it makes up costs memory.
* Each lane hands the book at most ``rate_per_s`` messages a second (after a burst): the
  CPU a flooding account can cost the link is bounded, and the rest of its time goes to
  reading the broker's deliveries, where the other tables' messages are (the flood beyond
  the lane's bound is dropped there, cheaply).
* :meth:`FairInbox.take` builds one batch: round robin over the lanes with something
  waiting, each given at most an equal share of ``limit`` per turn (deficit round robin
  with a quantum of ``limit // lanes``), so a flooding table gets its share and every other
  table gets its own in the same batch; no lane gives more than ``share_max`` to one batch,
  so that a batch (run on the event loop) stays short while one table floods, and the
  broker's deliveries and the heartbeats get the loop in between. A table's messages keep
  their order; the batch is ordered by receive time, and a receive time is never earlier
  than one already taken (the book's split window reads it: a link log never goes back in
  time).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable

from progressived.link.core.batch import Incoming

STRANGERS = ""  # the lane of every topic that names no member table
LANE_MAX = 2048  # messages one member table may have waiting (about a batch's worth)
STRANGERS_MAX = 64  # messages from topics naming no member, all together
SHARE_MAX = 256  # one lane's messages in one batch at most: a batch's time stays short
# one lane's messages to the book per second (a table at a dealer's pace sends a few a
# minute; its outbox after an outage drains at this rate), after a burst of BURST
RATE_PER_S = 500.0
BURST = 2 * SHARE_MAX


class FairInbox:
    """Per-table bounded lanes served round robin into batches (see the module)."""

    def __init__(
        self,
        members: Iterable[str],
        *,
        lane_max: int = LANE_MAX,
        strangers_max: int = STRANGERS_MAX,
        share_max: int = SHARE_MAX,
        rate_per_s: float = RATE_PER_S,
        burst: int = BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.members = frozenset(members)
        self.lane_max, self.strangers_max, self.share_max = lane_max, strangers_max, share_max
        self._lanes: dict[str, deque[Incoming]] = {}
        self._turn: deque[str] = deque()  # lanes with something waiting, next first
        self._depth = 0
        self._last_ms = 0
        self.dropped: Counter[str] = Counter()  # per lane (STRANGERS: every non-member)
        self.high_water = 0
        self._ready = asyncio.Event()
        self.rate_per_s, self.burst, self.clock = rate_per_s, float(burst), clock
        self._tokens: dict[str, float] = {}  # per lane: messages it may hand the book now
        self._refilled = clock()

    # ------------------------------------------------------------------ the callback's side
    def lane_of(self, table: str) -> str:
        return table if table in self.members else STRANGERS

    def offer(self, table: str, item: Incoming) -> bool:
        """File ``item`` under ``table``'s lane; False (counted) when that lane is full."""
        lane = self.lane_of(table)
        queue = self._lanes.get(lane)
        if queue is None:
            queue = self._lanes[lane] = deque()
        if len(queue) >= (self.strangers_max if lane == STRANGERS else self.lane_max):
            self.dropped[lane] += 1
            return False
        if not queue:
            self._turn.append(lane)
        queue.append(item)
        self._depth += 1
        self.high_water = max(self.high_water, self._depth)
        self._ready.set()
        return True

    # ------------------------------------------------------------------ the book's side
    def qsize(self) -> int:
        """Messages waiting, all lanes together."""
        return self._depth

    def empty(self) -> bool:
        return self._depth == 0

    def depths(self) -> dict[str, int]:
        """Messages waiting per lane that has any (a copy first: the metrics thread asks)."""
        return {lane: len(q) for lane, q in dict(self._lanes).items() if q}

    async def wait(self) -> None:
        """Return once something is waiting."""
        while self._depth == 0:
            self._ready.clear()
            await self._ready.wait()

    def _refill(self) -> None:
        now = self.clock()
        gained, self._refilled = (now - self._refilled) * self.rate_per_s, now
        for lane in self._turn:
            self._tokens[lane] = min(self.burst, self._tokens.get(lane, self.burst) + gained)

    def ready_in(self) -> float:
        """Seconds until a waiting lane may hand the book a message (0: now)."""
        self._refill()
        short = [1.0 - self._tokens.get(lane, self.burst) for lane in self._turn]
        return max(0.0, min(short, default=0.0)) / self.rate_per_s

    def take(self, limit: int) -> list[Incoming]:
        """At most ``limit`` messages, each waiting lane given its turn (see the module);
        none when every waiting lane has used its rate (:meth:`ready_in` says how long)."""
        self._refill()
        taken: list[list[Incoming]] = []
        given: dict[str, int] = {}
        room = max(1, limit)
        for lane in list(self._turn):  # out of rate: waits for its next batch
            given[lane] = self.share_max - min(self.share_max, int(self._tokens[lane]))
        while room and self._turn:
            quantum = max(1, room // len(self._turn))
            for _ in range(len(self._turn)):
                if not room:
                    break
                lane = self._turn.popleft()
                queue = self._lanes[lane]
                n = min(quantum, room, len(queue), self.share_max - given.get(lane, 0))
                self._tokens[lane] -= n
                taken.append([queue.popleft() for _ in range(n)])
                given[lane] = given.get(lane, 0) + n
                room -= n
                self._depth -= n
                if queue:
                    self._turn.append(lane)  # the rest waits for its next turn
                else:
                    self._tokens.pop(lane, None)  # a lane idle again starts with its burst
                    if lane not in self.members:
                        del self._lanes[lane]
            if all(given.get(lane, 0) >= self.share_max for lane in self._turn):
                break  # every lane waiting had its share of this batch
        return self._in_time_order(taken)

    def _in_time_order(self, runs: list[list[Incoming]]) -> list[Incoming]:
        out: list[Incoming] = []
        for item in heapq.merge(*runs, key=lambda i: i.at_ms):
            if item.at_ms < self._last_ms:  # queued behind a later one: never back in time
                out.append(Incoming(item.topic, item.payload, self._last_ms))
            else:
                self._last_ms = item.at_ms
                out.append(item)
        return out
