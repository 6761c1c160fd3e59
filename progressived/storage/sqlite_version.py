"""The oldest SQLite library the ledger can use, checked before a ledger file is touched.

The ledger's tables are STRICT (:mod:`progressived.ledger.schema`: a wrong type or a float
amount cannot be stored), which SQLite understands from 3.37.0 on. An older library can
neither create those tables nor read a file that has them (it calls the schema malformed),
so a machine with one would fail later with an error that names the wrong cause. Opening a
ledger file (a table's or a link's: :meth:`progressived.storage.sqlite.SqliteStore.open`)
and ``check-config`` / ``link --check`` / ``self-check`` check the library first and say in
one line what is needed (exit 8, docs/operations.md). Python uses the SQLite it was linked with:
``python3 -c 'import sqlite3; print(sqlite3.sqlite_version)'`` shows it.
"""

from __future__ import annotations

import sqlite3

from progressived.storage.errors import LedgerError

MINIMUM_SQLITE = (3, 37, 0)  # STRICT tables
MINIMUM_SQLITE_TEXT = ".".join(map(str, MINIMUM_SQLITE))


class SQLiteTooOld(LedgerError):
    """This system's SQLite library is older than the ledger's schema needs."""


def _parts(version: str) -> tuple[int, ...]:
    """``"3.40.1"`` -> ``(3, 40, 1)``; a part that is not a number counts as 0."""
    return tuple(int(part) if part.isdigit() else 0 for part in version.split(".")[:3])


def sqlite_too_old() -> str | None:
    """Why this system's SQLite cannot hold a ledger, or None when it can.

    Reads ``sqlite3.sqlite_version`` (the library Python is linked with) at each call.
    """
    version = sqlite3.sqlite_version
    if _parts(version) >= MINIMUM_SQLITE:
        return None
    return (
        f"this system's SQLite library is {version}; the ledger's STRICT tables need SQLite "
        f"{MINIMUM_SQLITE_TEXT} or later (Debian 12 has 3.40): upgrade libsqlite3, or run "
        "progressived on a Python linked with a newer SQLite"
    )


def require_sqlite() -> None:
    """Raise :class:`SQLiteTooOld` when this system's SQLite cannot hold a ledger."""
    if (why := sqlite_too_old()) is not None:
        raise SQLiteTooOld(why)
