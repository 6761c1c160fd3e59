"""A :class:`~progressived.engine.simulate.EventSink` that journals a simulation in a ledger.

``progressivectl simulate --ledger PATH`` uses it so that simulated rounds are recorded
exactly as the daemon records real ones: each accepted command's events in one
transaction. It writes nothing else: the ``start`` and ``stop`` rows and a
``command_rejected`` row for each refused line are journaled by the command itself
(:mod:`progressived.cli.simulate_cmd`).
"""

from __future__ import annotations

from collections.abc import Callable

from progressived.engine.events import Event
from progressived.engine.state import TableState
from progressived.ledger.store import Ledger


class LedgerSink:
    def __init__(self, ledger: Ledger, clock: Callable[[], str], actor: str = "simulate") -> None:
        self.ledger = ledger
        self.clock = clock
        self.actor = actor

    def record(self, events: tuple[Event, ...], state: TableState) -> None:
        self.ledger.append(events, state, at=self.clock(), actor=self.actor)
