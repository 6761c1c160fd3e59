"""The archive's inbox: one bounded lane per member table, served in turn (fair share).

The broker's deliveries are filed as they arrive, without waiting, under the table their
topic names (the broker's ACL lets a table's account write only its own topic, so the topic
says whose a message is). A lane holds at most ``lane_max`` messages; beyond that a message
is dropped and counted -- the table sends it again (its rows stay in its ledger until the
archive's head says they are stored). Topics that name no member share one small lane. A
batch takes the lanes in turn, one message each per round, so one table's flood costs the
others at most a turn.
"""

from __future__ import annotations

from collections import Counter, deque

from progressived.archive.core import wire

STRANGERS = "(not a member)"
STRANGERS_MAX = 8


class Lanes:
    def __init__(self, prefix: str, members: frozenset[str], lane_max: int) -> None:
        self.prefix = prefix
        self.members = members
        self.lane_max = lane_max
        self.lanes: dict[str, deque[tuple[str, bytes]]] = {}
        self.dropped: Counter[str] = Counter()
        self.high_water = 0
        self._turn: deque[str] = deque()

    def file(self, topic: str, payload: bytes) -> bool:
        """File one delivery; False when its lane is full (dropped and counted)."""
        table = wire.table_of(self.prefix, topic)
        if table is None:
            return False  # not an archive topic: the subscription does not deliver those
        lane_key = table if table in self.members else STRANGERS
        bound = self.lane_max if lane_key != STRANGERS else STRANGERS_MAX
        lane = self.lanes.get(lane_key)
        if lane is None:
            lane = self.lanes[lane_key] = deque()
        if len(lane) >= bound:
            self.dropped[lane_key] += 1
            return False
        if not lane:
            self._turn.append(lane_key)
        lane.append((table, payload))
        self.high_water = max(self.high_water, self.waiting())
        return True

    def waiting(self) -> int:
        return sum(len(lane) for lane in self.lanes.values())

    def take(self, limit: int) -> list[tuple[str, bytes]]:
        """Up to ``limit`` messages, the waiting lanes in turn; each lane's order kept."""
        out: list[tuple[str, bytes]] = []
        while self._turn and len(out) < limit:
            key = self._turn.popleft()
            lane = self.lanes[key]
            out.append(lane.popleft())
            if lane:
                self._turn.append(key)
        return out
