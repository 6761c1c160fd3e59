"""progressived: a progressive jackpot controller for casino table games.

Data flows one way, board -> engine -> ledger -> outbox -> signs, through folders that are
the architecture (docs/architecture.md): the pure ones (``core``, ``engine``, ``board``,
``link.core``: no I/O, no clock, no randomness), the adapters around them and the processes
composed from those. ``pyproject.toml``'s import-linter contracts hold the layers and the
purity, indirect imports included (``lint-imports``, run by .ci/test).
"""

__version__ = "0.1.0"
