"""progressived: a progressive jackpot controller for casino table games.

The package is layered so that data flows one way, board -> engine -> ledger -> outbox -> signs:

* ``progressived.engine`` is pure: no I/O, no clock, no randomness (tests/test_layering.py
  checks its imports, transitively); so are ``progressived.money`` and
  ``progressived.params``. The paytable and keypad *models* it uses are plain data; reading
  their files is an adapter's job.
* everything else is an adapter around that core (docs/architecture.md).
"""

__version__ = "0.1.0"
