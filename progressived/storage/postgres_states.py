"""What a PostgreSQL error means to a ledger: "cannot write now" (retry later) or a fault.

:class:`~progressived.storage.postgres.PostgresStore` raises ``LedgerUnavailable`` for the
first (the link waits and tries again: a failover, a full disk, a standby reached) and
``LedgerError`` for the rest (bad data, a broken schema: an operator's problem).
"""

from __future__ import annotations

import psycopg

# SQLSTATE classes and codes that mean "cannot write now" (retry later), not "bad data":
# connection exceptions, insufficient resources (disk full), operator intervention (admin
# shutdown, crash shutdown, cannot connect now, statement cancelled), a read-only standby
# (after a failover), serialization and deadlock, lock not available, idle-transaction
# timeout.
_UNAVAILABLE_CLASSES = ("08", "53", "57", "40")
_UNAVAILABLE_CODES = frozenset({"25006", "55P03", "25P03", "25P04"})


def is_unavailable(exc: psycopg.Error) -> bool:
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) and not exc.sqlstate:
        return True  # the connection is gone (no answer from the server at all)
    state = exc.sqlstate or ""
    return state[:2] in _UNAVAILABLE_CLASSES or state in _UNAVAILABLE_CODES
