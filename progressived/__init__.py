"""progressived: a progressive jackpot controller for casino table games.

The package is layered so that data flows one way, board -> engine -> ledger -> outbox -> signs:

* ``progressived.core.money``, ``progressived.core.paytable``, ``progressived.core.params``,
  ``progressived.board.keypad`` (the interpreter) and ``progressived.engine`` are pure: no I/O, no
  clock, no randomness (tests/test_layering.py follows their imports transitively).
* everything else is an adapter around that core (docs/architecture.md).
"""

__version__ = "0.1.0"
