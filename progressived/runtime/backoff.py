"""Jittered exponential backoff for every reconnect loop (the broker sessions, the serial board).

Why jitter: fifty tables that lose their broker at the same instant would otherwise retry at
the same instants for ever (0.5 s, 1 s, 2 s, ... after the loss) and reach a restarted
broker all together. Each wait is drawn at random between half and all of the exponential
step, so the clients spread out over the window and stay spread.

The ``n``-th consecutive wait (from 0) lies in ``[step / 2, step]`` with
``step = min(max_s, initial_s * 2 ** n)``: never shorter than half the first step (no
hammering), never longer than ``max_s`` (docs/mqtt.md, "Reconnecting").
"""

from __future__ import annotations

import random


class Backoff:
    """The waits between attempts: exponential from ``initial_s`` to ``max_s``, jittered."""

    def __init__(self, initial_s: float, max_s: float, *, rng: random.Random | None = None) -> None:
        if initial_s <= 0 or max_s <= 0:
            raise ValueError("backoff delays must be positive")
        self.initial_s = initial_s
        self.max_s = max(initial_s, max_s)
        self.failures = 0  # consecutive waits since the last reset
        # Each instance draws from its own generator, seeded from the OS: two processes (or
        # two sessions in one) never share a sequence, which would put them back in lockstep.
        self._rng = rng or random.Random()  # spreading retries, not a secret

    def step(self) -> float:
        """The upper bound of the next wait (the un-jittered exponential step)."""
        return min(self.max_s, self.initial_s * 2.0 ** min(self.failures, 64))

    def next(self) -> float:
        """The next wait, in seconds; each call backs off one step further."""
        step = self.step()
        self.failures += 1
        return self._rng.uniform(step / 2, step)

    def reset(self) -> None:
        """After a success: the next wait is drawn from the first step again."""
        self.failures = 0
