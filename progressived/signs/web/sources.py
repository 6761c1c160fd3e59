"""What a sign shows, read from the controllers' own files when no sign file says it.

A sign installed beside a table (or a link controller) already has that machine's
configuration: the table's ``[table] id`` and ``paytable``, or the link's ``[link] id``, its
member ``tables`` and its meters' ``paytable``. :func:`looks_from_files` turns them into the
sign's sources, each with its paytable, so the sign shows the game's title, the hands'
names and today's amounts, and shows **only** those tables and links (docs/sign.md,
"Which tables"). A file that cannot be used is one line (:class:`SourcesError`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from progressived.config.paytables import PaytableError, find_paytable
from progressived.core.paytable import Paytable
from progressived.runtime.config_files import read_toml
from progressived.signs.web.look import SignConfig, SourceLook

__all__ = ["DEFAULT_FILES", "SourcesError", "looks_from_files", "with_sources"]

# The shipped paths (docs/operations.md): a sign started with nothing named reads these.
DEFAULT_FILES = (
    Path("/etc/progressived/progressived.toml"),
    Path("/etc/progressived/link.toml"),
)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


class SourcesError(ValueError):
    """A controller's file the sign cannot read its sources from (one line)."""


def _ident(path: Path, key: str, value: object) -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise SourcesError(f"{path}: {key}: missing or not an id")
    return value


def _paytable(path: Path, key: str, value: object, folder: object) -> Paytable | None:
    if value is None:
        return None
    where = Path(folder) if isinstance(folder, str) else None
    try:
        return find_paytable(str(value), where)
    except PaytableError as exc:
        raise SourcesError(f"{path}: {key}: {exc}") from None


def looks_from_files(paths: Iterable[Path]) -> list[SourceLook]:
    """The sources named by table files (``[table]``) and link files (``[link]``)."""
    looks: list[SourceLook] = []
    for path in paths:
        data = read_toml(path, SourcesError)
        table, link = data.get("table"), data.get("link")
        if isinstance(table, dict):
            ident = _ident(path, "table.id", table.get("id"))
            paytable = _paytable(
                path, "table.paytable", table.get("paytable"), table.get("paytables")
            )
            looks.append(SourceLook("table", ident, paytable=paytable))
        elif isinstance(link, dict):
            ident = _ident(path, "link.id", link.get("id"))
            meters = link.get("meters")
            first = meters[0] if isinstance(meters, list) and meters else {}
            paytable = _paytable(path, "link.meters[0].paytable", first.get("paytable"), None)
            looks.append(SourceLook("link", ident, paytable=paytable))
            members = link.get("tables")
            for member in members if isinstance(members, list) else []:
                looks.append(
                    SourceLook("table", _ident(path, "link.tables", member), paytable=paytable)
                )
        else:
            raise SourcesError(f"{path}: neither a table's file ([table]) nor a link's ([link])")
    return looks


def with_sources(config: SignConfig, looks: Iterable[SourceLook]) -> SignConfig:
    """``config`` with ``looks`` added; the sign file's own entry for a source wins."""
    sources = dict(config.sources)
    for look in looks:
        key = f"{look.kind}/{look.id}"
        if key not in sources:
            sources[key] = look
        elif sources[key].paytable is None and look.paytable is not None:
            sources[key] = replace(sources[key], paytable=look.paytable)
    return replace(config, sources=sources)
