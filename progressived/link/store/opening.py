"""Where a link ledger lives: its store (the storage port) opened on a file or a database.

A path is a ledger file (:class:`~progressived.storage.sqlite.SqliteStore`, prepared as a
table ledger's file is: :func:`progressived.ledger.opening.open_file`); a ``postgresql://``
URL a PostgreSQL database (:class:`~progressived.storage.postgres.PostgresStore`). Both
refuse the same things: a missing ledger (:class:`LedgerMissing`), an existing one where a
new one is made (:class:`LedgerExists`), something that is not a ledger
(:class:`LedgerMismatch`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from progressived.ledger import opening
from progressived.ledger.errors import LedgerMismatch
from progressived.link.core import journal
from progressived.storage.location import Location, is_url
from progressived.storage.port import LedgerStore


def open_store(
    location: Location,
    link_id: str,
    at: str,
    software: str,
    presence: str,
    *,
    password: str | None = None,
) -> tuple[LedgerStore, dict[str, str]]:
    """The store at ``location`` and its ``meta``; ``presence`` ``existing`` or ``new``
    (``password``: for a database, when libpq's own sources do not hold it)."""
    if is_url(location):
        from progressived.storage.postgres import PostgresStore  # noqa: PLC0415 - psycopg

        store = PostgresStore.open(
            str(location), presence, link_id, at, software, password=password
        )
        return store, store.meta()
    return opening.open_file(Path(location), link_id, at, software, presence)


def check_meta(where: str, meta: Mapping[str, str], link_id: str) -> None:
    """``meta`` must say: a link ledger, of this link."""
    kind = meta.get("ledger_kind", "table")
    if kind != journal.LEDGER_KIND:
        raise LedgerMismatch(
            f"{where} is a {kind} ledger (table {meta.get('table_id')!r}), "
            f"not link {link_id!r}'s ledger: refusing to open it"
        )
    if meta.get("link_id") != link_id:
        raise LedgerMismatch(
            f"ledger {where} belongs to link {meta.get('link_id')!r}, "
            f"not {link_id!r}: refusing to open it"
        )
